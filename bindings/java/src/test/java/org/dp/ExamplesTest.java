package org.dp;

import static org.junit.jupiter.api.Assertions.*;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The examples as a user runs them: TrainFashionMnist under a pseudo-terminal and with a pipe
 * (tests/check_progress.py: a progress line on the terminal only, the same lines otherwise), writing a
 * checkpoint; then Serve from 4 threads on that checkpoint, which must classify the test set exactly as
 * the training example's inference net did.
 */
class ExamplesTest {
  static final String DATA = "/usr/share/datasets/fashion-mnist";

  /** Runs a command (stdout and stderr together) and returns its output; fails on a non-zero exit. */
  static String run(List<String> cmd, Path log) throws Exception {
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
    for (String v : new String[] {"DP_WORLD_SIZE", "DP_RANK", "DP_STORE", "DP_TIMEOUT_MS", "DP_INTERFACE", "DP_RUN_ID"}) {
      pb.environment().remove(v); // one process, whatever dp-run's variables say
    }
    Process p = pb.start();
    assertTrue(p.waitFor(240, TimeUnit.SECONDS), cmd.get(0) + " did not finish in time");
    String out = Files.readString(log);
    assertEquals(0, p.exitValue(), String.join(" ", cmd) + ":\n" + out);
    return out;
  }

  static String value(String text, String regex) {
    Matcher m = Pattern.compile(regex).matcher(text);
    assertTrue(m.find(), "no match for " + regex + " in:\n" + text);
    return m.group(1);
  }

  @Test
  void trainingDrawsProgressAndServeMatchesItsInferenceNet() throws Exception {
    assumeTrue(Files.exists(Path.of(DATA, "t10k-images-idx3-ubyte.gz")), "no Fashion-MNIST data");
    Path jar = TestSupport.buildRoot().resolve("bindings/java");
    Path classes = jar.resolve("test-classes");
    assumeTrue(Files.exists(classes.resolve("Serve.class")), "examples not compiled into " + classes);
    Path dir = TestSupport.tempDir("examples");
    try {
      String nets = TestSupport.sourceRoot().resolve("samples/nets").toString();
      List<String> java = List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-cp",
          jar.resolve("dp.jar") + ":" + classes, "-Djava.library.path=" + jar);
      Path ckpt = Files.createDirectories(dir.resolve("ckpt"));
      List<String> train = new ArrayList<>(List.of("python3",
          TestSupport.sourceRoot().resolve("tests/check_progress.py").toString()));
      train.addAll(java);
      train.addAll(List.of("TrainFashionMnist", "--limit", "1024", "--epochs", "1", "--nets", nets, "--checkpoint",
          ckpt.toString()));
      String trained = run(train, dir.resolve("train.log"));
      String inferred = value(trained, "(?m)^inference: test_acc=([0-9.]+) ");

      List<String> serve = new ArrayList<>(java);
      serve.addAll(List.of("Serve", "--checkpoint", ckpt.toString(), "--workers", "4", "--batch", "50", "--nets", nets));
      String served = run(serve, dir.resolve("serve.log"));
      assertEquals(inferred, value(served, "from 4 workers: test_acc=([0-9.]+) "), served);
    } finally {
      TestSupport.deleteTree(dir);
    }
  }
}
