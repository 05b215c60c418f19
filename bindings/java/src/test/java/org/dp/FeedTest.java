package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A fed blob that no net of the workspace reads (a misspelt name): a warning through the log
 * callback by default, the run going on; with {@link NetOptions#unreadFeedError}, a
 * {@link DpNotFoundException} before any op runs, the next run going on.
 */
class FeedTest {
  @Test
  void unreadFeedsWarnOrFail() {
    List<String> warnings = new ArrayList<>();
    Log.setCallback((level, m) -> {
      if (m.contains("fed blob")) {
        synchronized (warnings) {
          warnings.add(m);
        }
      }
    }, Log.WARNING);
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create();
         Net strict = Net.create(ws, def, new NetOptions().unreadFeedError(true));
         Net lenient = Net.create(ws, def, new NetOptions())) {
      assertFalse(new NetOptions().unreadFeedError);
      ws.feed("x", ForwardTest.X, 2, 3);
      ws.feed("w", ForwardTest.W, 2, 3);
      ws.feed("b", ForwardTest.B, 2);
      strict.run();
      ws.feed("xx", ForwardTest.X, 2, 3);
      DpNotFoundException e = assertThrows(DpNotFoundException.class, strict::run);
      assertTrue(e.getMessage().contains("fed blob 'xx'") && e.getMessage().contains("did you mean 'x'?"),
          e.getMessage());
      strict.run(); // reported: the next run goes on

      ws.feed("xx", ForwardTest.X, 2, 3);
      lenient.run();
      synchronized (warnings) {
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("fed blob 'xx'") && warnings.get(0).contains("did you mean 'x'?"),
            warnings.get(0));
      }
    } finally {
      Log.setCallback(null, Log.WARNING);
    }
  }

  /**
   * The CUDA graphs option reaches dp_net_create (a value outside DP_CUDA_GRAPHS_* is refused); on
   * a CPU net, which never runs as a graph, every setting runs the same.
   */
  @Test
  void cudaGraphsOption() {
    assertEquals(NetOptions.CUDA_GRAPHS_DEFAULT, new NetOptions().cudaGraphs);
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create()) {
      ws.feed("x", ForwardTest.X, 2, 3);
      ws.feed("w", ForwardTest.W, 2, 3);
      ws.feed("b", ForwardTest.B, 2);
      float[] first = null;
      for (int g : new int[] {NetOptions.CUDA_GRAPHS_DEFAULT, NetOptions.CUDA_GRAPHS_ON, NetOptions.CUDA_GRAPHS_OFF}) {
        try (Net net = Net.create(ws, def, new NetOptions().cudaGraphs(g))) {
          net.run();
          float[] y = ws.fetchFloats("y");
          if (first == null) first = y;
          assertArrayEquals(first, y);
        }
      }
      DpInvalidArgumentException e =
          assertThrows(DpInvalidArgumentException.class, () -> Net.create(ws, def, new NetOptions().cudaGraphs(7)));
      assertTrue(e.getMessage().contains("cuda_graphs"), e.getMessage());
    }
  }

  /**
   * The math mode option reaches dp_net_create (a value outside DP_MATH_* is refused); a CPU net
   * computes in float32 in every mode.
   */
  @Test
  void mathModeOption() {
    assertEquals(NetOptions.MATH_DEFAULT, new NetOptions().mathMode);
    try (NetDef def = NetDef.fromJson(TestSupport.FC_RELU_NET); Workspace ws = Workspace.create()) {
      ws.feed("x", ForwardTest.X, 2, 3);
      ws.feed("w", ForwardTest.W, 2, 3);
      ws.feed("b", ForwardTest.B, 2);
      float[] first = null;
      for (int m : new int[] {NetOptions.MATH_DEFAULT, NetOptions.MATH_FP32, NetOptions.MATH_TF32, NetOptions.MATH_BF16,
               NetOptions.MATH_FP16}) {
        try (Net net = Net.create(ws, def, new NetOptions().mathMode(m))) {
          net.run();
          float[] y = ws.fetchFloats("y");
          if (first == null) first = y;
          assertArrayEquals(first, y);
        }
      }
      DpInvalidArgumentException e =
          assertThrows(DpInvalidArgumentException.class, () -> Net.create(ws, def, new NetOptions().mathMode(5)));
      assertTrue(e.getMessage().contains("math_mode"), e.getMessage());
    }
  }
}
