/* log: see include/h5osfs/util/log.h. */
#include "h5osfs/util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINE_MAX 2048

/* Written once by log_setup before threads start, read-only afterwards. */
static struct {
    enum log_level level;
    enum log_sink sink;
    int fd;
} log_cfg = { LOG_LVL_WARN, LOG_SINK_STDERR, STDERR_FILENO };

static const char *const level_names[] = { "error", "warning", "info", "debug" };

int log_setup(enum log_level level, enum log_sink sink, const char *path)
{
    log_cfg.level = level;
    log_cfg.sink = sink;
    log_cfg.fd = STDERR_FILENO;
    if (sink == LOG_SINK_FILE) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd < 0)
            return -errno;
        log_cfg.fd = fd;
    } else if (sink == LOG_SINK_SYSLOG) {
        openlog("h5osfs", LOG_PID, LOG_DAEMON);
    }
    return 0;
}

void log_teardown(void)
{
    if (log_cfg.sink == LOG_SINK_FILE && log_cfg.fd > STDERR_FILENO)
        close(log_cfg.fd);
    else if (log_cfg.sink == LOG_SINK_SYSLOG)
        closelog();
    log_cfg.sink = LOG_SINK_STDERR;
    log_cfg.fd = STDERR_FILENO;
}

int log_enabled(enum log_level level)
{
    return level <= log_cfg.level;
}

/* Copy src into dst, writing bytes outside printable ASCII as \xNN: one event, one line. */
static size_t escape_line(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)src; *p && n + 5 < cap; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '\\') {
            dst[n++] = (char)*p;
        } else if (*p == '\\') {
            dst[n++] = '\\';
            dst[n++] = '\\';
        } else {
            dst[n++] = '\\';
            dst[n++] = 'x';
            dst[n++] = hex[*p >> 4];
            dst[n++] = hex[*p & 15];
        }
    }
    dst[n] = '\0';
    return n;
}

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere left to report a failing log */
        buf += w;
        len -= (size_t)w;
    }
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vmsg(level, fmt, ap);
    va_end(ap);
}

void log_vmsg(enum log_level level, const char *fmt, va_list ap)
{
    if (!log_enabled(level))
        return;
    int saved_errno = errno;
    char raw[LOG_LINE_MAX], line[LOG_LINE_MAX * 2];
    vsnprintf(raw, sizeof raw, fmt, ap);
    size_t rlen = strlen(raw);
    while (rlen > 0 && raw[rlen - 1] == '\n')
        raw[--rlen] = '\0'; /* other libraries' lines come with their newline */

    if (log_cfg.sink == LOG_SINK_SYSLOG) {
        static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
        escape_line(line, sizeof line, raw);
        syslog(prio[level], "%s", line);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        int n = snprintf(line, sizeof line,
                         "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ h5osfs[%d] %s: ", tm.tm_year + 1900,
                         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                         ts.tv_nsec / 1000000, (int)getpid(), level_names[level]);
        size_t len = (size_t)n + escape_line(line + n, sizeof line - (size_t)n - 1, raw);
        line[len++] = '\n';
        write_all(log_cfg.fd, line, len);
    }
    errno = saved_errno;
}
