/* The save entry points other folders use besides the public calq_save_* (src/search's trials). */
#ifndef CALQ_EXPORT_SAVE_H
#define CALQ_EXPORT_SAVE_H

#include "calq.h"

/* calq_save_models without the "calq: wrote ..." line of the commit: for files that are not the
 * caller's outputs (calq_fallback's trial models). The export's DEBUG lines still go to the
 * calq_set_log callback. */
calq_status calq__save_models_quiet(const calq_model *m, const char *record, const char *config,
                                    const calq_save_format *fmts, int n_fmts, const char *prefix, calq_error *err);

#endif
