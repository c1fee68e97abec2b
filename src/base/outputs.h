/* The outputs of one run under one prefix (calibration's record and config, save's models),
 * staged together and committed all or nothing, under an advisory lock (issue 14, items 4-5).
 * The public functions are calq_outputs_begin / _commit / _abort (calq.h); this header gives the
 * library's writers the staged set to write into. */
#ifndef CALQ_BASE_OUTPUTS_H
#define CALQ_BASE_OUTPUTS_H

#include <stdbool.h>

#include "base/file.h"

struct calq_outputs {
    char *prefix;    /* as given */
    char *lock_path; /* <prefix>.lock */
    int lock_fd;     /* holds the flock until commit / abort */
    calq_staged_files staged;
};

/* begin, with the commit's log line on or off (the library's own sets log only when asked) */
calq_status calq__outputs_begin(const char *prefix, calq_outputs **out, calq_error *err);
calq_status calq__outputs_commit(calq_outputs *o, bool log, calq_error *err);

/* The file to read for `path`: its staged temporary file (flushed) when o stages it, else path
 * itself. o may be NULL. */
const char *calq__outputs_source(calq_outputs *o, const char *path);

/* The temporary files an interrupted run left next to `prefix`: "<base>...tmp.<pid>" in its
 * folder, where base is the prefix's last component and <pid> a process that no longer exists.
 * Removes them and returns how many (one log line names them). */
int calq__outputs_clean_stale(const char *prefix);

#endif
