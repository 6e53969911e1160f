/* srv_endpoints.h — the endpoints without generation (srv_endpoints.c). Internal. */
#ifndef IG_SRV_ENDPOINTS_H
#define IG_SRV_ENDPOINTS_H

#include "srv_internal.h"

/* Each: 0 and *out (malloc'd JSON) for a 200, or -1 and err. */
int srv_ep_models(const srv *s, const char *id_or_NULL, char **out, srv_error *err);
int srv_ep_health(const srv *s, char **out, srv_error *err);
int srv_ep_tokenize(srv *s, const char *body, size_t len, char **out, srv_error *err);
int srv_ep_detokenize(srv *s, const char *body, size_t len, char **out, srv_error *err);
/* srv_messages.c, shared with srv_request.c */
int srv_parse_messages(const cJSON *v, srv_params *p, srv_error *err);
int srv_parse_tools(const cJSON *v, srv_params *p, srv_error *err);

#endif
