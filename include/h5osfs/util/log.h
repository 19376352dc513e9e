/*
 * log: one line per event, safe from any thread.
 *
 * Every error is logged once, where it is first understood: what failed, which key or path,
 * and why. The message is formatted whole and written with one write(2) (or one syslog call),
 * so lines from parallel FUSE workers never interleave. Control characters and bytes that
 * are not printable ASCII are written as \xNN, so a hostile object name cannot forge a line.
 */
#ifndef H5OSFS_LOG_H
#define H5OSFS_LOG_H

#include <stdarg.h>

enum log_level { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

/* Where lines go: stderr (the default), syslog, or a file opened for appending. */
enum log_sink { LOG_SINK_STDERR = 0, LOG_SINK_SYSLOG, LOG_SINK_FILE };

/* Set up before any thread starts; path only for LOG_SINK_FILE. Returns 0 or -errno. */
int log_setup(enum log_level level, enum log_sink sink, const char *path);
void log_teardown(void);
int log_enabled(enum log_level level);

void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_vmsg(enum log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                           \
    do {                                         \
        if (log_enabled(LOG_LVL_DEBUG))          \
            log_msg(LOG_LVL_DEBUG, __VA_ARGS__); \
    } while (0)

#endif
