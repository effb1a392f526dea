/* kind_preset.c — see kind_preset.h. */
#include "kind_preset.h"

#include <string.h>

#include "../common/json.h"
#include "../store/store.h"


static int is_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble == (double)(int64_t)v->valuedouble;
}

int kind_preset_check(const cJSON *params, struct dd_err *err)
{
	const cJSON *p = json_get(params, "preset");
	if (!p)
		return DD_OK;
	const cJSON *hidden = json_get(p, "hidden"), *h;
	if (!cJSON_IsObject(p) || !is_id(json_get(p, "id")) || !is_id(json_get(p, "class_id")) || !cJSON_IsArray(hidden) ||
	    cJSON_GetArraySize(p) != 3)
		return dd_err_set(err, DD_EINVAL,
				  "preset: the mark of a lab preset, {\"id\", \"class_id\", \"hidden\"}; make a model from a "
				  "preset with POST /api/v1/models {\"preset\": ID, …}");
	cJSON_ArrayForEach(h, hidden)
	{
		if (!cJSON_IsString(h) || strlen(h->valuestring) > 95)
			return dd_err_set(err, DD_EINVAL, "preset.hidden: must be a list of field names");
	}
	cJSON *stored = NULL;
	if (store_preset_json((int64_t)json_get(p, "id")->valuedouble, &stored, NULL) != DD_OK)
		return DD_OK; /* the preset is gone since: the mark stays as it was */
	int same = cJSON_Compare(json_get(stored, "class_id"), json_get(p, "class_id"), 1) &&
		   cJSON_Compare(json_get(stored, "hidden"), hidden, 1);
	cJSON_Delete(stored);
	return same ? DD_OK :
		      dd_err_set(err, DD_EINVAL, "preset: does not match lab preset %lld (its class and hidden fields)",
				 (long long)json_get(p, "id")->valuedouble);
}
