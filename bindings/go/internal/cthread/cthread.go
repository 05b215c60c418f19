// Package cthread calls dp from a thread that C created (never seen by the
// Go runtime before), for the binding's tests: cgo is not allowed in
// _test.go files, so the C side lives here.
package cthread

/*
#cgo pkg-config: dp
#cgo LDFLAGS: -lpthread
#include <pthread.h>
#include <string.h>
#include <stdlib.h>
#include <dp/dp.h>

typedef struct { const char* json; int32_t code; } job;

// Creates (and frees) a net from JSON: net creation logs at INFO level.
static void* run_job(void* arg) {
  job* j = (job*)arg;
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_status* s = dp_workspace_create(&ws);
  if (s == NULL) s = dp_netdef_from_json(j->json, strlen(j->json), &def);
  if (s == NULL) s = dp_net_create(ws, def, NULL, &net);
  j->code = dp_status_code(s);
  dp_status_free(s);
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
  return NULL;
}

static int32_t create_net_on_pthread(const char* json) {
  job j = {json, -1};
  pthread_t t;
  if (pthread_create(&t, NULL, run_job, &j) != 0) return -2;
  pthread_join(t, NULL);
  return j.code;
}
*/
import "C"

import "unsafe"

// CreateNetOnPthread creates and frees a net from json on a new pthread and
// returns the dp status code (0: OK; -2: no thread).
func CreateNetOnPthread(json string) int {
	cs := C.CString(json)
	defer C.free(unsafe.Pointer(cs))
	return int(C.create_net_on_pthread(cs))
}
