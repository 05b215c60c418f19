package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Models: introspection, optimizer, serialisation, and data parallelism over CPU replicas. */
class ModelTest {
  @Test
  void introspectionAndRoundTrips() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      assertEquals("tiny", m.name());
      assertEquals(List.of("w", "b"), m.blobs(Model.PARAMS));
      assertEquals(List.of(), m.blobs(Model.COMPUTED_PARAMS));
      assertEquals(List.of("data", "label"), m.blobs(Model.INPUTS));
      assertEquals(List.of("loss"), m.blobs(Model.LOSSES));
      assertEquals(List.of("accuracy"), m.blobs(Model.METRICS));
      assertTrue(m.hasOptimizer());
      OptimizerInfo o = m.optimizer();
      assertEquals("momentum", o.type);
      assertEquals(0.1, o.lr, 1e-12);
      assertEquals(0.9, o.momentum, 1e-12);
      assertEquals("fixed", o.lrPolicy);
      try (NetDef init = m.net(Model.INIT_NET); NetDef fwd = m.net(Model.FORWARD_NET)) {
        assertEquals("tiny_init", init.name());
        assertEquals("FC", fwd.op(0).type());
      }
      try (Model fromBuf = Model.fromBuffer(m.toBuffer()); Model fromJson = Model.fromJson(m.toJson())) {
        assertEquals("tiny", fromBuf.name());
        assertEquals(List.of("w", "b"), fromJson.blobs(Model.PARAMS));
      }
      try (TrainingNets t = m.buildTraining(new TrainingOptions().lr(0.05).lossScale(1.0))) {
        assertTrue(t.train.numOps() > t.eval.numOps());
      }
    }
    Path file = TestSupport.sourceRoot().resolve("samples/nets/fashion_mlp.json");
    try (Model m = Model.fromFile(file.toString())) {
      assertEquals("adam", m.optimizer().type);
      assertEquals(937, m.optimizer().stepsize);
    }
  }

  @Test
  void twoCpuReplicasTrainLikeOneDevice() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL); ParallelModel pm = m.parallelize(ParallelOptions.cpu(2).shards(1, 0));
         TrainingNets defs = pm.nets(); Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
         Net train = Net.create(ws, defs.train); Net eval = Net.create(ws, defs.eval)) {
      assertEquals(2, pm.numReplicas());
      assertEquals(1, pm.numShards());
      assertEquals(0, pm.shardId());
      assertEquals("cpu_0/", pm.scope(0));
      assertEquals("cpu_1/", pm.scope(1));
      assertNull(pm.scope(2));
      init.run();
      for (int s = 0; s < 10; ++s) {
        ws.feed("data", TestSupport.tinyData(s), 8, 4);
        ws.feed("label", TestSupport.tinyLabels(s), 8);
        train.run();
      }
      float[][] one = TestSupport.trainTiny(m, 10);
      assertArrayEquals(one[0], ws.fetchFloats("cpu_0/w"), 1e-5f);
      assertArrayEquals(ws.fetchFloats("cpu_0/w"), ws.fetchFloats("cpu_1/w"), 1e-6f);
      eval.run();
      try (NetDef sync = pm.syncNet()) {
        assertTrue(sync.numOps() > 0);
      }
      ws.feed("cpu_1/w", new float[12], 3, 4);
      pm.sync(ws);
      assertArrayEquals(ws.fetchFloats("cpu_0/w"), ws.fetchFloats("cpu_1/w"));
      assertThrows(DpFailedPreconditionException.class, pm::blockNet);
    }
  }

  /** Keeping every blob, sharing blocks and freeing after use train the same bits (since 0.6). */
  @Test
  void memoryModesTrainAlike() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      float[] keep = null;
      NetMemoryStats share = null;
      for (int mode : new int[] {NetOptions.MEMORY_KEEP, NetOptions.MEMORY_DEFAULT, NetOptions.MEMORY_FREE}) {
        try (TrainingNets defs = m.buildTraining(new TrainingOptions().memory(mode)); Workspace ws = Workspace.create();
             Net init = Net.create(ws, defs.init); Net train = Net.create(ws, defs.train)) {
          assertEquals(mode == NetOptions.MEMORY_DEFAULT ? NetOptions.MEMORY_SHARE : mode, defs.train.memory());
          trainTenSteps(ws, init, train);
          float[] w = ws.fetchFloats("w");
          if (keep == null) keep = w;
          else assertArrayEquals(keep, w);
          NetMemoryStats st = train.memoryStats(Dp.DEVICE_CPU, 0);
          assertTrue(st.peakBytes > 0 && st.peakBytes >= st.bytesInUse, st.toString());
          if (mode == NetOptions.MEMORY_KEEP) {
            assertEquals(NetOptions.MEMORY_KEEP, st.mode);
            assertEquals(0, st.temporaries);
            assertEquals(8 * 3, ws.fetchFloats("logits").length);
          } else {
            DpException e = assertThrows(DpNotFoundException.class, () -> ws.fetchFloats("logits"));
            assertTrue(e.getMessage().contains("memory plan"), e.getMessage());
            if (mode == NetOptions.MEMORY_DEFAULT) {
              share = st;
              assertEquals(NetOptions.MEMORY_SHARE, st.mode);
              assertTrue(st.slots > 0 && st.slotBytes > 0, st.toString());
            } else {
              assertEquals(NetOptions.MEMORY_FREE, st.mode);
              assertEquals(share.temporaries, st.temporaries);
              assertEquals(0, st.slotBytes);
            }
          }
          assertThrows(DpInvalidArgumentException.class, () -> train.memoryStats(9, 0));
        }
      }
      assertThrows(DpInvalidArgumentException.class, () -> m.buildTraining(new TrainingOptions().memory(7)));
      ParallelOptions keepAll = ParallelOptions.cpu(2).shards(1, 0);
      keepAll.memory = NetOptions.MEMORY_KEEP;
      assertArrayEquals(trainTwoReplicas(m, ParallelOptions.cpu(2).shards(1, 0)), trainTwoReplicas(m, keepAll));
    }
  }

  /**
   * Dynamic loss scaling trains the same bits while nothing overflows and keeps its scale; a net in FP16
   * math that computes gradients needs it (since 0.6).
   */
  @Test
  void lossScalingTrainsAlikeAndFp16NeedsIt() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      float[][] w = new float[2][];
      int[] modes = {TrainingOptions.LOSS_SCALING_NONE, TrainingOptions.LOSS_SCALING_DYNAMIC};
      for (int i = 0; i < 2; ++i) {
        TrainingOptions opts = new TrainingOptions().lossScaling(modes[i]);
        opts.initialLossScale = 512;
        try (TrainingNets defs = m.buildTraining(opts);
             Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
             Net train = Net.create(ws, defs.train)) {
          trainTenSteps(ws, init, train);
          w[i] = ws.fetchFloats("w");
          if (i == 1) assertArrayEquals(new float[] {512f}, ws.fetchFloats("optimizer/loss_scale"));
          NetOptions fp16 = new NetOptions().mathMode(NetOptions.MATH_FP16);
          if (i == 0) {
            DpException e = assertThrows(DpInvalidArgumentException.class, () -> Net.create(ws, defs.train, fp16));
            assertTrue(e.getMessage().contains("loss scaling"), e.getMessage());
          } else {
            Net.create(ws, defs.train, fp16).close();
          }
        }
      }
      assertArrayEquals(w[0], w[1]);
      assertThrows(DpInvalidArgumentException.class, () -> m.buildTraining(new TrainingOptions().lossScaling(7)));
      ParallelOptions bad = ParallelOptions.cpu(1).shards(1, 0);
      bad.lossScaling = 7;
      assertThrows(DpInvalidArgumentException.class, () -> m.parallelize(bad));
    }
  }

  /** A copy per replica, one shared model and the layout dp picks train alike. */
  @Test
  void replicaLayoutsTrainAlike() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      float[] copies = trainTwoReplicas(m, ParallelOptions.cpu(2).shards(1, 0));
      ParallelOptions shared = ParallelOptions.cpu(2).shards(1, 0);
      shared.sharedModel = true;
      assertArrayEquals(copies, trainTwoReplicas(m, shared), 1e-5f);
      ParallelOptions auto = ParallelOptions.cpu(2).shards(1, 0);
      auto.sharedModelAuto = true;
      assertArrayEquals(copies, trainTwoReplicas(m, auto), 1e-5f);
      // The gradient allreduce in 16 bits (since 0.6): close to float32's, not its bits.
      for (int c : new int[] {ParallelOptions.GRADIENT_COMPRESSION_BF16, ParallelOptions.GRADIENT_COMPRESSION_FP16}) {
        ParallelOptions packed = ParallelOptions.cpu(2).shards(1, 0);
        packed.gradientCompression = c;
        float[] got = trainTwoReplicas(m, packed);
        assertArrayEquals(copies, got, 2e-2f);
        assertFalse(java.util.Arrays.equals(copies, got), "compression " + c + " changed nothing");
      }
      // A sharded optimizer state (ZeRO-1, since 0.6): the unsharded bits.
      ParallelOptions sharded = ParallelOptions.cpu(2).shards(1, 0);
      sharded.shardOptimizerState = true;
      assertArrayEquals(copies, trainTwoReplicas(m, sharded));
      // AUTO with BMUF is a copy per replica; ON with BMUF is refused.
      auto.bmuf = true;
      try (ParallelModel pm = m.parallelize(auto)) {
        assertEquals(2, pm.numReplicas());
      }
      shared.bmuf = true;
      DpException e = assertThrows(DpInvalidArgumentException.class, () -> m.parallelize(shared));
      assertTrue(e.getMessage().contains("shared_model"), e.getMessage());
    }
  }

  private static float[] trainTwoReplicas(Model m, ParallelOptions o) {
    try (ParallelModel pm = m.parallelize(o); TrainingNets defs = pm.nets(); Workspace ws = Workspace.create();
         Net init = Net.create(ws, defs.init); Net train = Net.create(ws, defs.train)) {
      trainTenSteps(ws, init, train);
      return ws.fetchFloats("cpu_0/w");
    }
  }

  /** The init net, then ten steps on the tiny model's batches. */
  private static void trainTenSteps(Workspace ws, Net init, Net train) {
    init.run();
    for (int s = 0; s < 10; ++s) {
      ws.feed("data", TestSupport.tinyData(s), 8, 4);
      ws.feed("label", TestSupport.tinyLabels(s), 8);
      train.run();
    }
  }

  /**
   * The several-processes options (since 0.3), without starting other processes; numShards is explicit
   * so that DP_WORLD_SIZE and friends in the environment change nothing.
   */
  @Test
  void shardOptionsOfOneProcess() {
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      try (ParallelModel pm = m.parallelize(ParallelOptions.cpu(1).shards(1, 0)); Workspace ws = Workspace.create()) {
        assertEquals(1, pm.numShards());
        assertEquals(0, pm.shardId());
        assertEquals(1, pm.numReplicas());
        // One process: join returns at once, having shadowed no step.
        assertEquals(0, pm.join(ws));
        assertThrows(DpInvalidArgumentException.class, () -> pm.join(null));
      }
      DpException e = assertThrows(DpInvalidArgumentException.class,
          () -> m.parallelize(new ParallelOptions().shards(2, 0).store("tcp://nope")));
      assertEquals(DpException.INVALID_ARGUMENT, e.code());
      assertTrue(e.getMessage().contains("store address"), e.getMessage());
      e = assertThrows(DpInvalidArgumentException.class, () -> m.parallelize(new ParallelOptions().shards(2, 2)));
      assertTrue(e.getMessage().contains("shard_id"), e.getMessage());
      ParallelOptions timeout = new ParallelOptions().shards(1, 0);
      timeout.timeoutMs = -1;
      e = assertThrows(DpInvalidArgumentException.class, () -> m.parallelize(timeout));
      assertTrue(e.getMessage().contains("timeout_ms"), e.getMessage());
      ParallelOptions runId = new ParallelOptions().shards(1, 0);
      runId.runId = "a/b";
      e = assertThrows(DpInvalidArgumentException.class, () -> m.parallelize(runId));
      assertTrue(e.getMessage().contains("run id"), e.getMessage());
      ParallelOptions transport = new ParallelOptions().shards(1, 0);
      transport.localTransport = "udp";
      e = assertThrows(DpInvalidArgumentException.class, () -> m.parallelize(transport));
      assertTrue(e.getMessage().contains("local_transport"), e.getMessage());
      // Explicit strings that are valid with one process are accepted.
      ParallelOptions named = new ParallelOptions().shards(1, 0);
      named.runId = "java-test";
      named.networkInterface = "lo";
      named.timeoutMs = 1000;
      named.localTransport = "tcp";
      try (ParallelModel pm = m.parallelize(named)) {
        assertEquals(1, pm.numShards());
      }
    }
  }

  @Test
  void accumulationBmufAndParallelCheckpoints() throws Exception {
    Path dir = TestSupport.tempDir("pm");
    try (Model m = Model.fromJson(TestSupport.TINY_MODEL)) {
      try (ParallelModel acc = m.parallelize(ParallelOptions.cpu(2).shards(1, 0).accumulateSteps(2));
           NetDef a = acc.accumulateNet()) {
        assertTrue(a.numOps() > 0);
      }
      try (ParallelModel b = m.parallelize(ParallelOptions.cpu(2).shards(1, 0).bmuf(4)); BlockNet block = b.blockNet()) {
        assertEquals(4, block.blockLength);
        assertTrue(block.netDef.numOps() > 0);
      }
      String path = dir.resolve(Checkpoint.stepFileName(2)).toString();
      try (ParallelModel pm = m.parallelize(ParallelOptions.cpu(2).shards(1, 0)); TrainingNets defs = pm.nets();
           Workspace ws = Workspace.create(); Net init = Net.create(ws, defs.init);
           Net train = Net.create(ws, defs.train)) {
        init.run();
        for (int s = 0; s < 2; ++s) {
          ws.feed("data", TestSupport.tinyData(s), 8, 4);
          ws.feed("label", TestSupport.tinyLabels(s), 8);
          train.run();
        }
        pm.save(ws, path, null);
        float[] w = ws.fetchFloats("cpu_0/w");
        try (CheckpointInfo info = CheckpointInfo.fromFile(path)) {
          assertEquals("tiny", info.modelName());
          assertEquals(2, info.iteration());
        }
        // Into three replicas: the file does not depend on the device count.
        try (ParallelModel pm3 = m.parallelize(ParallelOptions.cpu(3).shards(1, 0)); TrainingNets d3 = pm3.nets();
             Workspace ws3 = Workspace.create(); Net init3 = Net.create(ws3, d3.init)) {
          init3.run();
          pm3.load(ws3, path, new CheckpointLoadOptions());
          assertArrayEquals(w, ws3.fetchFloats("cpu_2/w"), 1e-7f);
        }
      }
    } finally {
      TestSupport.deleteTree(dir);
    }
  }
}
