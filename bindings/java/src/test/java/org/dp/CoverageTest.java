package org.dp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** Fails when dp.h declares a function that the JNI glue never calls. */
class CoverageTest {
  private static String stripComments(String c) {
    return c.replaceAll("(?s)/\\*.*?\\*/", " ").replaceAll("//[^\n]*", " ");
  }

  static List<String> declaredFunctions() throws IOException {
    String header = stripComments(Files.readString(TestSupport.sourceRoot().resolve("include/dp/dp.h")));
    List<String> names = new ArrayList<>();
    // DP_API <return type and qualifiers> dp_name(  -- declarations may span lines.
    Matcher m = Pattern.compile("DP_API[^;(]*?\\b(dp_[a-z0-9_]+)\\s*\\(").matcher(header);
    while (m.find()) names.add(m.group(1));
    return names;
  }

  @Test
  void everyDeclaredFunctionIsCalledByTheGlue() throws IOException {
    List<String> declared = declaredFunctions();
    assertTrue(declared.size() >= 130, "parsed only " + declared.size() + " declarations from dp.h");
    StringBuilder glue = new StringBuilder();
    Path dir = TestSupport.sourceRoot().resolve("bindings/java/src/main/c");
    try (Stream<Path> files = Files.list(dir)) {
      for (Path p : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".c"))::iterator) {
        glue.append(stripComments(Files.readString(p))).append('\n');
      }
    }
    TreeSet<String> missing = new TreeSet<>();
    for (String name : declared) {
      if (!Pattern.compile("\\b" + name + "\\s*\\(").matcher(glue).find()) missing.add(name);
    }
    assertEquals(new TreeSet<String>(), missing, "dp.h functions the Java binding does not wrap");
  }
}
