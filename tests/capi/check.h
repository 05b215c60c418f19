/*
 * The checks of the strict-C11 API tests (test_capi.c, test_options.c,
 * test_introspect.c): every check is counted, and a failure prints file:line,
 * the expression and the status message. A test ends with
 * check_report(), which prints "<passed> passed, <failed> failed" as its last
 * line and returns the exit status (nonzero on any failure).
 *
 * Header-only (static functions): each test is one translation unit.
 */
#ifndef DP_TESTS_CAPI_CHECK_H_
#define DP_TESTS_CAPI_CHECK_H_

#include <dp/dp.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_checks = 0;
static int g_failures = 0;

static int check_impl(int ok, const char* expr, const char* file, int line) {
  ++g_checks;
  if (!ok) {
    ++g_failures;
    fprintf(stderr, "%s:%d: CHECK failed: %s\n", file, line, expr);
  }
  return ok;
}

#define CHECK(cond) check_impl((cond) ? 1 : 0, #cond, __FILE__, __LINE__)

/* Checks that a call returned `code` (DP_OK: a NULL status), that an error
 * carries a non-empty message and that the message contains each of the
 * non-NULL substrings s1..s3. Frees the status. Returns 1 if all held. */
static int expect_status(const char* file, int line, const char* expr, dp_status* st, int32_t code,
                         const char* s1, const char* s2, const char* s3) {
  const char* subs[3];
  const char* msg = dp_status_message(st);
  int32_t got = dp_status_code(st);
  int ok = 1;
  size_t i;
  subs[0] = s1;
  subs[1] = s2;
  subs[2] = s3;
  ++g_checks;
  if (got != code) {
    fprintf(stderr, "%s:%d: %s: expected %s, got %s: %s\n", file, line, expr, dp_status_code_name(code),
            dp_status_code_name(got), msg);
    ok = 0;
  } else if (code != DP_OK) {
    if (st == NULL || msg == NULL || msg[0] == '\0') {
      fprintf(stderr, "%s:%d: %s: %s status has an empty message\n", file, line, expr, dp_status_code_name(code));
      ok = 0;
    }
    for (i = 0; i < 3 && ok; ++i) {
      if (subs[i] != NULL && strstr(msg, subs[i]) == NULL) {
        fprintf(stderr, "%s:%d: %s: message does not contain \"%s\": %s\n", file, line, expr, subs[i], msg);
        ok = 0;
      }
    }
  }
  if (!ok) ++g_failures;
  dp_status_free(st);
  return ok;
}

#define EXPECT_OK(expr) expect_status(__FILE__, __LINE__, #expr, (expr), DP_OK, NULL, NULL, NULL)
#define EXPECT_CODE(expr, code) expect_status(__FILE__, __LINE__, #expr, (expr), (code), NULL, NULL, NULL)
#define EXPECT_ERR(expr, code, s1) expect_status(__FILE__, __LINE__, #expr, (expr), (code), (s1), NULL, NULL)
#define EXPECT_ERR2(expr, code, s1, s2) expect_status(__FILE__, __LINE__, #expr, (expr), (code), (s1), (s2), NULL)
#define EXPECT_ERR3(expr, code, s1, s2, s3) \
  expect_status(__FILE__, __LINE__, #expr, (expr), (code), (s1), (s2), (s3))

/* A pointer value no successful call would return: failing calls must leave
 * out-parameters holding it. */
static max_align_t g_sentinel_object;
#define SENTINEL ((void*)&g_sentinel_object)

/* The whole file in a new buffer (free it), or NULL. */
static inline unsigned char* read_whole_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  unsigned char* data = NULL;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (data = (unsigned char*)malloc((size_t)n + 1)) != NULL && fread(data, 1, (size_t)n, f) == (size_t)n) {
    *size = (size_t)n;
  } else {
    free(data);
    data = NULL;
  }
  fclose(f);
  return data;
}

/* Both non-NULL and equal. */
static inline int streq(const char* a, const char* b) { return a != NULL && b != NULL && strcmp(a, b) == 0; }

/* Prints the totals and returns the exit status. */
static int check_report(void) {
  (void)&g_sentinel_object; /* used by some tests only */
  printf("%d passed, %d failed\n", g_checks - g_failures, g_failures);
  return g_failures == 0 ? 0 : 1;
}

#endif /* DP_TESTS_CAPI_CHECK_H_ */
