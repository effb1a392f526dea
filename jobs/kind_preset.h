/* kind_preset.h — the mark a lab preset leaves in a job's params.
 *
 * A model made from a lab preset (app/api/api_classes.c, api_preset_apply) carries
 * "preset": {"id", "class_id", "hidden": ["solver.base_lr", …]} in its params, so
 * that every view of the job (app/http/job_view.h) knows which values its owner
 * may not see, and a clone or a resume, which copies the params, keeps both the
 * values (it trains the same) and the mark.  The mark only ever hides: a job that
 * names a preset falsely hides its own values from its own owner. */
#ifndef DD_KIND_PRESET_H
#define DD_KIND_PRESET_H

#include <cjson/cJSON.h>

#include "../common/err.h"

/* The kinds' rule for params.preset (absent is fine): the shape above, and, while
 * the preset exists, its class and its hidden fields as the store has them.
 * DD_OK or DD_EINVAL with a sentence. */
int kind_preset_check(const cJSON *params, struct dd_err *err);

#endif
