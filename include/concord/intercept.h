/* The client API of libconcord_intercept.so (docs/intercept.md): what an application run under
 * the library may call to tell the node daemon more than its launches show. Plain C, so any
 * language's foreign-function interface can call it; an application that may run without the
 * library declares the functions weak and checks them for null.
 *
 * Each call returns 0 when the daemon was told and a positive number when the call had no effect
 * (no daemon, pass-through, or the daemon's protocol has no message for it); it never fails the
 * application. */
#ifndef CONCORD_INTERCEPT_H
#define CONCORD_INTERCEPT_H

#ifdef __cplusplus
extern "C" {
#endif

/* An LC request begins: the launches from here to concord_request_end() serve one request, whose
 * latency the tenant's target bounds. */
int concord_request_begin(void);
/* The request begun last ends (call it after the request's results are on the host). */
int concord_request_end(void);

#ifdef __cplusplus
}
#endif

#endif /* CONCORD_INTERCEPT_H */
