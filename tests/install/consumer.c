/* Built against an installed dp with `pkg-config --cflags --libs dp` alone. */
#include <dp/dp.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  const char* json =
      "{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Scale\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],"
      "\"args\":[{\"name\":\"scale\",\"f\":3}]}]}";
  float x[2] = {1.5f, -2.0f};
  int64_t dims[1] = {2};
  dp_workspace* ws = NULL;
  dp_netdef* def = NULL;
  dp_net* net = NULL;
  dp_tensor* t = NULL;
  dp_tensor* y = NULL;
  if (dp_version_number() != DP_VERSION_NUMBER) return 1;
  if (dp_workspace_create(&ws) || dp_netdef_from_json(json, strlen(json), &def) ||
      dp_tensor_create(DP_DTYPE_FLOAT32, dims, 1, x, sizeof x, &t) || dp_workspace_feed(ws, "x", t) ||
      dp_net_create(ws, def, NULL, &net) || dp_net_run(net) || dp_workspace_fetch(ws, "y", &y)) {
    fprintf(stderr, "consumer: a dp call failed\n"); /* statuses leak here: the process exits */
    return 1;
  }
  const float* p = dp_tensor_data(y);
  int ok = p[0] == 4.5f && p[1] == -6.0f;
  printf("installed dp %s: y = [%g, %g]\n", dp_version(), p[0], p[1]);
  /* Where the build has CUDA, the installed library finds its module beside itself. */
  dp_build_info info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  dp_status* st = dp_build_info_get(&info);
  if (st != NULL) {
    dp_status_free(st);
    return 1;
  }
  printf("cuda_state=%d (%s)\n", (int)info.cuda_state, info.cuda_state_detail);
  dp_tensor_free(y);
  dp_tensor_free(t);
  dp_net_free(net);
  dp_netdef_free(def);
  dp_workspace_free(ws);
  return ok ? 0 : 1;
}
