package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.junit.jupiter.api.Test;

/** 10,000 create/free cycles of every kind of handle leave the resident set flat. */
class MemoryTest {
  private static long rssBytes() throws IOException {
    String[] f = Files.readString(Paths.get("/proc/self/statm")).trim().split("\\s+");
    return Long.parseLong(f[1]) * 4096L;
  }

  private static void cycle(int i) {
    try (Workspace ws = Workspace.create(); NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET);
         Net net = Net.create(ws, def); Tensor x = Tensor.of(ForwardTest.X, 2, 3)) {
      ws.feed("x", x);
      ws.feed("w", ForwardTest.W, 2, 3);
      ws.feed("b", ForwardTest.B, 2);
      net.run();
      try (Tensor y = ws.fetch("y")) {
        if (y.numel() != 4) throw new AssertionError("bad output");
      }
      assertThrows(DpNotFoundException.class, () -> ws.fetch("missing" + (i & 7)));
    }
  }

  @Test
  void createFreeCyclesKeepRssFlat() throws IOException {
    for (int i = 0; i < 2000; ++i) cycle(i); // warm up: JIT, heap, allocator arenas
    System.gc();
    long before = rssBytes();
    for (int i = 0; i < 10_000; ++i) cycle(i);
    System.gc();
    long after = rssBytes();
    long growth = after - before;
    assertTrue(growth < 24L << 20, "RSS grew by " + (growth >> 10) + " KiB over 10,000 cycles");
  }
}
