/*
 * dp-ops-doc: writes docs/OPS.md, the reference of every operator type, from
 * the op catalogue of the C API (dp_opschema_*), so that the document says
 * what a user of this library sees. Strict C11 against dp.h only.
 *
 *   dp-ops-doc [OUTPUT]     (stdout without OUTPUT)
 *
 * The build runs it (tools/ops_doc/meson.build); the ops_doc test compares
 * the result with the committed docs/OPS.md in builds without CUDA, and
 * `ninja -C build-cpu ops-doc` copies it there.
 */
#include <dp/dp.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Writes s with the characters that would break a Markdown table cell
 * ('|', newlines) escaped. */
static void cell(FILE* out, const char* s) {
  for (; *s != '\0'; ++s) {
    if (*s == '|')
      fputs("\\|", out);
    else if (*s == '\n')
      fputc(' ', out);
    else
      fputc(*s, out);
  }
}

/* "1", "1 to 3", "2 or more", "none". */
static void count_range(FILE* out, int32_t min, int32_t max) {
  if (max == 0)
    fputs("none", out);
  else if (min == max)
    fprintf(out, "%d", (int)min);
  else if (max == INT32_MAX)
    fprintf(out, "%d or more", (int)min);
  else
    fprintf(out, "%d to %d", (int)min, (int)max);
}

/* The name of input or output i, as messages call it: `X`, or "input 3". */
static void blob_name(FILE* out, const dp_opschema* s, int32_t i, int output) {
  const char* name = output ? dp_opschema_output_name(s, (size_t)i) : dp_opschema_input_name(s, (size_t)i);
  if (name != NULL)
    fprintf(out, "`%s`", name);
  else
    fprintf(out, "%s %d", output ? "output" : "input", (int)i);
}

static void blobs(FILE* out, const dp_opschema* s, int output) {
  const int32_t min = output ? dp_opschema_min_outputs(s) : dp_opschema_min_inputs(s);
  const int32_t max = output ? dp_opschema_max_outputs(s) : dp_opschema_max_inputs(s);
  const size_t named = output ? dp_opschema_num_named_outputs(s) : dp_opschema_num_named_inputs(s);
  size_t i;
  fprintf(out, "- %s: ", output ? "Outputs" : "Inputs");
  count_range(out, min, max);
  for (i = 0; i < named; ++i) {
    fputs(i == 0 ? " — " : ", ", out);
    blob_name(out, s, (int32_t)i, output);
    if ((int32_t)i >= min) fputs(" (optional)", out);
  }
  fputs("\n", out);
}

static void inplace(FILE* out, const dp_opschema* s) {
  const size_t n = dp_opschema_num_inplace(s);
  const int32_t shift = dp_opschema_inplace_shift(s);
  size_t i;
  if (n == 0 && shift < 0) {
    fputs("- In place: no output may be an input\n", out);
    return;
  }
  fputs("- In place: ", out);
  for (i = 0; i < n; ++i) {
    int32_t in = 0, o = 0;
    const int32_t rule = dp_opschema_inplace_at(s, i, &in, &o);
    if (i > 0) fputs("; ", out);
    blob_name(out, s, o, 1);
    fputs(rule == DP_INPLACE_ENFORCED ? " must be " : " may be ", out);
    blob_name(out, s, in, 0);
  }
  if (shift >= 0) fprintf(out, "%soutput k must be input k + %d, for every output", n > 0 ? "; " : "", (int)shift);
  fputs("\n", out);
}

static const char* kind_name(int32_t kind) {
  switch (kind) {
    case DP_ARG_FLOAT: return "float";
    case DP_ARG_INT: return "int";
    case DP_ARG_STRING: return "string";
    case DP_ARG_FLOATS: return "floats";
    case DP_ARG_INTS: return "ints";
    case DP_ARG_STRINGS: return "strings";
    case DP_ARG_NET: return "net";
    case DP_ARG_NETS: return "nets";
    default: return "?";
  }
}

static void arguments(FILE* out, const dp_opschema* s) {
  const size_t n = dp_opschema_num_args(s);
  size_t i;
  if (n == 0) {
    fputs("\nNo arguments.\n", out);
    return;
  }
  fputs("\n| Argument | Kind | Default | Required | Description |\n|---|---|---|---|---|\n", out);
  for (i = 0; i < n; ++i) {
    fprintf(out, "| `%s` | %s | ", dp_opschema_arg_name(s, i), kind_name(dp_opschema_arg_kind(s, i)));
    if (dp_opschema_arg_required(s, i)) {
      fputs("— | yes | ", out);
    } else {
      /* A value in code font; a described default as words. */
      const int value = dp_opschema_arg_default(s, i) != NULL;
      if (value) fputs("`", out);
      cell(out, dp_opschema_arg_default_text(s, i));
      fputs(value ? "` | no | " : " | no | ", out);
    }
    cell(out, dp_opschema_arg_doc(s, i));
    fputs(" |\n", out);
  }
}

static int kernels(FILE* out, const dp_opschema* s, int with_cuda) {
  static const int32_t devices[2] = {DP_DEVICE_CPU, DP_DEVICE_CUDA};
  static const char* const names[2] = {"CPU", "CUDA"};
  int d, any = 0;
  fputs("- Kernels: ", out);
  for (d = 0; d < (with_cuda ? 2 : 1); ++d) {
    dp_string_list* engines = NULL;
    size_t k;
    if (!dp_opschema_has_kernel(s, devices[d])) continue;
    fprintf(out, "%s%s", any ? ", " : "", names[d]);
    any = 1;
    if (dp_opschema_engines(s, devices[d], &engines) != NULL) return 0; /* cannot fail for a valid device */
    for (k = 0; k < dp_string_list_size(engines); ++k)
      fprintf(out, "%s`%s`", k == 0 ? " (engines " : ", ", dp_string_list_get(engines, k));
    if (dp_string_list_size(engines) > 0) fputs(")", out);
    dp_string_list_free(engines);
  }
  fputs(any ? "\n" : "none\n", out);
  return 1;
}

static const char* gradient_text(int32_t g) {
  switch (g) {
    case DP_GRADIENT_DIFFERENTIABLE: return "differentiable";
    case DP_GRADIENT_NOT_DIFFERENTIABLE: return "not differentiable (a loss may not depend on a param through it)";
    case DP_GRADIENT_STOP: return "stops gradients (its inputs receive none)";
    default: return "none registered (a gradient op)";
  }
}

/* The first sentence of a doc, for the index. */
static void summary(FILE* out, const char* doc) {
  const char* end = strstr(doc, ". ");
  if (end == NULL) {
    cell(out, doc);
    return;
  }
  {
    size_t len = (size_t)(end - doc) + 1;
    char* first = (char*)malloc(len + 1);
    if (first == NULL) return;
    memcpy(first, doc, len);
    first[len] = '\0';
    cell(out, first);
    free(first);
  }
}

static void header(FILE* out, int with_cuda) {
  fputs("# Operators\n\n", out);
  fputs("<!-- Generated by tools/ops_doc/dp_ops_doc.c from the op catalogue of the C API; do not edit.\n"
        "     Regenerate with `ninja -C build-cpu ops-doc` (a build configured with -Dcuda=disabled). -->\n\n",
        out);
  fputs("Every operator type dp knows, as the op catalogue of the C API reports it (`dp_opschema_list_types`,\n"
        "`dp_opschema_from_type` and the `dp_opschema_*` getters, wrapped by each binding): what it computes, its\n"
        "inputs and outputs, its arguments with their kinds and defaults (the value the kernel uses when an op\n"
        "leaves the argument out, or a description where no single value says it), which outputs may or must be\n"
        "written in place of an input, the devices with a kernel for it, and whether it has a gradient. A net is\n"
        "validated against exactly this when it is loaded; an unknown type or argument is refused with the nearest\n"
        "known name.\n\n",
        out);
  if (with_cuda)
    fputs("This file was generated by a build with CUDA: the Kernels lines list its CUDA kernels too. The committed\n"
          "docs/OPS.md comes from a build without CUDA.\n\n",
          out);
  else
    fputs("Kernels: this file is generated by a build without CUDA (`-Dcuda=disabled`), so that it does not depend\n"
          "on the machine that builds it, and it lists the CPU kernels, which every build has for every type. A\n"
          "CUDA build adds CUDA kernels for some types, and the op types of its CUDA communicator; ask\n"
          "`dp_opschema_has_kernel(schema, DP_DEVICE_CUDA)` of the library at hand.\n\n",
          out);
}

static int write_doc(FILE* out) {
  dp_build_info info;
  dp_string_list* types = NULL;
  dp_status* st;
  size_t i, n;
  int ok = 1;
  memset(&info, 0, sizeof info);
  info.struct_size = (uint32_t)sizeof info;
  st = dp_build_info_get(&info);
  if (st == NULL) st = dp_opschema_list_types(&types);
  if (st != NULL) {
    fprintf(stderr, "dp-ops-doc: %s\n", dp_status_message(st));
    dp_status_free(st);
    return 0;
  }
  header(out, info.cuda);
  n = dp_string_list_size(types);
  fprintf(out, "## Index\n\n%d types.\n\n| Type | Summary |\n|---|---|\n", (int)n);
  for (i = 0; i < n && ok; ++i) {
    dp_opschema* s = NULL;
    const char* type = dp_string_list_get(types, i);
    st = dp_opschema_from_type(type, &s);
    if (st != NULL) break;
    fprintf(out, "| [%s](#%s) | ", type, type);
    summary(out, dp_opschema_doc(s));
    fputs(" |\n", out);
    dp_opschema_free(s);
  }
  fputs("\n## Types\n", out);
  for (i = 0; i < n && ok && st == NULL; ++i) {
    dp_opschema* s = NULL;
    st = dp_opschema_from_type(dp_string_list_get(types, i), &s);
    if (st != NULL) break;
    /* An explicit anchor: the index links to it whatever a renderer makes of the heading. */
    fprintf(out, "\n<a id=\"%s\"></a>\n### %s\n\n%s\n\n", dp_opschema_type(s), dp_opschema_type(s),
            dp_opschema_doc(s));
    blobs(out, s, 0);
    blobs(out, s, 1);
    inplace(out, s);
    ok = kernels(out, s, info.cuda);
    fprintf(out, "- Gradient: %s\n", gradient_text(dp_opschema_gradient(s)));
    arguments(out, s);
    dp_opschema_free(s);
  }
  dp_string_list_free(types);
  if (st != NULL) {
    fprintf(stderr, "dp-ops-doc: %s\n", dp_status_message(st));
    dp_status_free(st);
    return 0;
  }
  return ok;
}

int main(int argc, char** argv) {
  FILE* out = stdout;
  int ok;
  if (argc > 2) {
    fprintf(stderr, "usage: dp-ops-doc [OUTPUT]\n");
    return 2;
  }
  if (argc == 2 && (out = fopen(argv[1], "w")) == NULL) {
    perror(argv[1]);
    return 1;
  }
  ok = write_doc(out);
  if (fflush(out) != 0) ok = 0;
  if (out != stdout && fclose(out) != 0) ok = 0;
  if (!ok) fprintf(stderr, "dp-ops-doc: failed\n");
  return ok ? 0 : 1;
}
