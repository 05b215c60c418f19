package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** Many threads at once: training, logging, and dp releasing Java buffers on its own threads. */
class ThreadsTest {
  @Test
  void eightThreadsTrainSeparateNets() throws Exception {
    try (Model model = Model.fromJson(TestSupport.TINY_MODEL)) {
      float[][] expected = TestSupport.trainTiny(model, 30);
      ExecutorService pool = Executors.newFixedThreadPool(8);
      try {
        List<Future<float[][]>> results = new ArrayList<>();
        for (int t = 0; t < 8; ++t) results.add(pool.submit(() -> TestSupport.trainTiny(model, 30)));
        for (Future<float[][]> f : results) {
          float[][] got = f.get(120, TimeUnit.SECONDS);
          assertArrayEquals(expected[0], got[0], 1e-6f);
          assertArrayEquals(expected[1], got[1], 1e-6f);
        }
      } finally {
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS));
      }
    }
  }

  @Test
  void logCallbackFromManyThreads() throws Exception {
    Set<String> threads = ConcurrentHashMap.newKeySet();
    AtomicInteger messages = new AtomicInteger();
    Log.setCallback((level, msg) -> {
      assertTrue(level >= Log.INFO);
      threads.add(Thread.currentThread().getName());
      messages.incrementAndGet();
      throw new RuntimeException("callbacks that throw are contained");
    }, Log.INFO);
    ExecutorService pool = Executors.newFixedThreadPool(4);
    try {
      List<Future<?>> fs = new ArrayList<>();
      for (int t = 0; t < 4; ++t) {
        fs.add(pool.submit(() -> {
          // Creating a net logs at INFO ("created with N ops").
          for (int i = 0; i < 5; ++i) {
            try (Workspace ws = Workspace.create(); NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET);
                 Net net = Net.create(ws, def)) {
              assertNotNull(net);
            }
          }
        }));
      }
      for (Future<?> f : fs) f.get(60, TimeUnit.SECONDS);
    } finally {
      pool.shutdownNow();
      assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS));
      Log.setCallback(null, Log.WARNING);
    }
    assertTrue(messages.get() >= 20, "messages: " + messages.get());
    assertTrue(threads.size() >= 2, "threads: " + threads);
  }

  /** Print ops that the async executor's own worker threads run (runAsync: the caller runs none,
   * await does not help) reach the Java callback on those native threads, attached to the JVM. */
  @Test
  void printOpsLogFromDpWorkerThreads() throws Exception {
    List<String> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Set<Long> threads = ConcurrentHashMap.newKeySet();
    Log.setCallback((level, msg) -> {
      if (!msg.contains("(Print)")) return;
      got.add(msg);
      threads.add(Thread.currentThread().getId());
    }, Log.INFO);
    StringBuilder ops = new StringBuilder();
    for (int i = 0; i < 8; ++i) {
      ops.append(i == 0 ? "" : ",").append("{\"type\":\"Print\",\"inputs\":[\"x\"],\"args\":[{\"name\":\"limit\",\"i\":2}]}");
    }
    String json = "{\"name\":\"printer\",\"executor\":\"Async\",\"num_workers\":2,"
        + "\"external_inputs\":[\"x\"],\"ops\":[" + ops + "]}";
    try (Workspace ws = Workspace.create(); NetDef def = NetDef.fromJson(json); Net net = Net.create(ws, def)) {
      ws.feed("x", new float[] {1.5f, -2f, 3f}, 3);
      net.runAsync();
      assertTrue(net.await(60_000));
    } finally {
      Log.setCallback(null, Log.WARNING);
    }
    assertEquals(8, got.size(), got.toString());
    assertTrue(got.get(0).contains("'x' float32 [3] = [1.5, -2, ...]"), got.get(0));
    assertFalse(threads.contains(Thread.currentThread().getId()), "a Print ran on the caller's thread");
  }

  @Test
  void warningsOfCorruptCheckpointsReachTheCallback() throws Exception {
    List<String> got = new java.util.concurrent.CopyOnWriteArrayList<>();
    Log.setCallback((level, msg) -> got.add(level + ":" + msg), Log.WARNING);
    java.nio.file.Path dir = TestSupport.tempDir("log");
    try {
      java.nio.file.Files.write(dir.resolve(Checkpoint.stepFileName(5)), new byte[] {9, 9, 9});
      Thread t = new Thread(() -> assertEquals(List.of(), Checkpoint.listSteps(dir.toString())));
      t.start();
      t.join(60_000);
      assertFalse(t.isAlive());
    } finally {
      Log.setCallback(null, Log.WARNING);
      TestSupport.deleteTree(dir);
    }
    assertTrue(got.stream().anyMatch(s -> s.startsWith(Log.WARNING + ":") && s.contains("step-000000005")),
        got.toString());
  }

  /** An async net overwrites a blob fed from a wrapped buffer on a dp worker thread: the release of
   * the buffer's global reference then runs on that native thread, attached to the JVM. */
  @Test
  void wrappedBuffersReleasedFromWorkerThreads() throws Exception {
    String json = "{\"external_inputs\":[\"x\"],\"ops\":["
        + "{\"type\":\"Relu\",\"inputs\":[\"x\"],\"outputs\":[\"x\"]}]}";
    long before = Tensor.liveWrappedBuffers();
    try (NetDef def = NetDef.fromJson(json); Workspace ws = Workspace.create();
         Net net = Net.create(ws, def, new NetOptions().executor(NetOptions.EXECUTOR_ASYNC).numWorkers(2))) {
      for (int i = 0; i < 50; ++i) {
        ByteBuffer buf = ByteBuffer.allocateDirect(16).order(ByteOrder.nativeOrder());
        buf.asFloatBuffer().put(new float[] {-1f, 2f, -3f, 4f});
        try (Tensor t = Tensor.wrap(DType.FLOAT32, buf, 4)) {
          ws.feed("x", t);
        }
        net.runAsync();
        assertTrue(net.await(60_000));
        assertArrayEquals(new float[] {0f, 2f, 0f, 4f}, ws.fetchFloats("x"));
      }
    }
    assertEquals(before, Tensor.liveWrappedBuffers());
  }

  /**
   * Issue 25, item 12: threads feeding one blob crashed the process. Eight threads feed and fetch
   * one blob (borrowed buffers included: the workspace must keep the one the blob holds) and one
   * each, ask for and list blobs, while a net that only reads blobs they fetch runs.
   */
  @Test
  void eightThreadsFeedAndFetchWhileANetReads() throws Exception {
    String json = "{\"name\":\"reader\",\"external_inputs\":[\"w\",\"b\"],\"ops\":["
        + "{\"type\":\"Scale\",\"inputs\":[\"w\"],\"outputs\":[\"y\"],\"args\":[{\"name\":\"scale\",\"f\":2}]},"
        + "{\"type\":\"Scale\",\"inputs\":[\"b\"],\"outputs\":[\"z\"],\"args\":[{\"name\":\"scale\",\"f\":3}]}]}";
    int threads = 8, iters = 200, runs = 50;
    float[] w = new float[64];
    java.util.Arrays.fill(w, 0.5f);
    try (NetDef def = NetDef.fromJson(json); Workspace ws = Workspace.create()) {
      ws.feed("w", w, 64);
      ws.feed("b", new float[] {-1f}, 1);
      try (Net net = Net.create(ws, def)) {
        ExecutorService pool = Executors.newFixedThreadPool(threads + 1);
        java.util.concurrent.CyclicBarrier start = new java.util.concurrent.CyclicBarrier(threads + 1);
        try {
          List<Future<?>> done = new ArrayList<>();
          done.add(pool.submit(() -> {
            start.await();
            for (int r = 0; r < runs; ++r) net.run();
            return null;
          }));
          for (int t = 0; t < threads; ++t) {
            int id = t;
            done.add(pool.submit(() -> {
              String own = "own/" + id;
              start.await();
              for (int k = 0; k < iters; ++k) {
                int n = 1 + (id + k) % 5; // values 1000 id + k: a torn tensor shows
                float[] v = new float[n];
                java.util.Arrays.fill(v, 1000f * id + k);
                if (k % 2 == 0) {
                  ws.feed("shared", v, n);
                } else {
                  ByteBuffer buf = ByteBuffer.allocateDirect(4 * n).order(ByteOrder.nativeOrder());
                  buf.asFloatBuffer().put(v);
                  try (Tensor b = Tensor.borrow(DType.FLOAT32, buf, n)) {
                    ws.feed("shared", b);
                  }
                }
                ws.feed(own, new float[] {k, k, k}, 3);
                float[] got = ws.fetchFloats("shared");
                int from = (int) got[0] / 1000, step = (int) got[0] % 1000;
                assertEquals(1 + (from + step) % 5, got.length);
                for (float x : got) assertEquals(got[0], x);
                assertArrayEquals(new float[] {k, k, k}, ws.fetchFloats(own));
                assertArrayEquals(w, ws.fetchFloats("w"));
                assertTrue(ws.hasBlob("shared"));
                assertFalse(ws.listBlobs("own/").isEmpty());
              }
              return null;
            }));
          }
          for (Future<?> f : done) f.get(120, TimeUnit.SECONDS);
        } finally {
          pool.shutdownNow();
          assertTrue(pool.awaitTermination(60, TimeUnit.SECONDS));
        }
      }
      float[] y = ws.fetchFloats("y");
      for (float v : y) assertEquals(1f, v);
      assertArrayEquals(new float[] {-3f}, ws.fetchFloats("z"));
      assertEquals(threads, ws.listBlobs("own/").size());
    }
  }
}
