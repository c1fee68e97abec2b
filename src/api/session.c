/* calq_session_create: the executor's session over the model's graph. exec works on a
 * calq_graph and never sees the model struct (docs/architecture.md, Layers). */
#include "base/error.h"
#include "exec/session.h"
#include "frontend/model.h"

calq_status calq_session_create(calq_model *m, const calq_session_opts *opts, calq_session **out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, m);
    return calq__session_create_graph(m->g, opts, out, err);
}
