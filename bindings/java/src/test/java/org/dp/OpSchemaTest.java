package org.dp;

import static org.junit.jupiter.api.Assertions.*;

import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The op catalogue: the type list, one type's schema, defaults, in-place rules, kernels, gradients. */
class OpSchemaTest {
  @Test
  void everyListedTypeHasASchemaAndACpuKernel() {
    List<String> types = OpSchema.types();
    assertTrue(types.size() >= 70, types.size() + " types");
    for (int i = 1; i < types.size(); ++i) {
      assertTrue(types.get(i - 1).compareTo(types.get(i)) < 0, "sorted, no duplicates");
    }
    assertTrue(types.containsAll(Arrays.asList("Relu", "ReluGradient", "Sub", "Div", "SquaredL2Distance")));
    for (String t : types) {
      OpSchema s = OpSchema.of(t);
      assertEquals(t, s.type());
      assertFalse(s.doc().isEmpty(), t);
      assertTrue(s.hasKernel(Dp.DEVICE_CPU), t);
    }
  }

  @Test
  void fcSchema() {
    OpSchema s = OpSchema.of("FC");
    assertEquals(3, s.minInputs());
    assertEquals(3, s.maxInputs());
    assertEquals(1, s.minOutputs());
    assertEquals(1, s.maxOutputs());
    assertEquals(Arrays.asList("X", "W", "b"), s.inputNames());
    assertEquals(Arrays.asList("Y"), s.outputNames());
    assertEquals(3, s.args().size());
    assertTrue(s.inplace().isEmpty());
    assertEquals(-1, s.inplaceShift());
    assertEquals(OpSchema.GRADIENT_DIFFERENTIABLE, s.gradient());
    OpSchema.Arg axis = s.arg("axis");
    assertEquals(ArgDef.INT, axis.kind());
    assertFalse(axis.required());
    assertFalse(axis.doc().isEmpty());
    assertEquals(1L, axis.defaultValue());
    assertEquals("1", axis.defaultText());
    OpSchema.Arg act = s.arg("activation");
    assertEquals("none", act.defaultValue());
    assertEquals("\"none\"", act.defaultText());
    assertNull(s.arg("no_such"));
  }

  @Test
  void defaultsRequiredAndDescribed() {
    OpSchema lr = OpSchema.of("LearningRate");
    assertTrue(lr.arg("base_lr").required());
    assertNull(lr.arg("base_lr").defaultValue());
    assertEquals("", lr.arg("base_lr").defaultText());
    assertEquals(0.1, lr.arg("gamma").defaultValue());
    OpSchema.Arg seed = OpSchema.of("Dropout").arg("seed");
    assertNull(seed.defaultValue());
    assertEquals("a hash of output 0's name", seed.defaultText());
    // A float argument's default is a Double even where it reads as an integer.
    assertEquals(1.0, OpSchema.of("Scale").arg("scale").defaultValue());
    OpSchema.Arg shape = OpSchema.of("ConstantFill").arg("shape");
    assertEquals(ArgDef.INTS, shape.kind());
    assertArrayEquals(new long[0], (long[]) shape.defaultValue());
    assertEquals("[]", shape.defaultText());
  }

  @Test
  void inplaceKernelsGradients() {
    List<OpSchema.InplacePair> add = OpSchema.of("Add").inplace();
    assertEquals(2, add.size());
    assertEquals(0, add.get(0).input());
    assertEquals(0, add.get(0).output());
    assertEquals(1, add.get(1).input());
    assertEquals(OpSchema.INPLACE_ALLOWED, add.get(1).rule());
    List<OpSchema.InplacePair> bn = OpSchema.of("SpatialBN").inplace();
    assertEquals(3, bn.size());
    assertEquals(OpSchema.INPLACE_ENFORCED, bn.get(0).rule());
    assertEquals(3, bn.get(0).input());
    assertEquals(1, bn.get(0).output());
    assertEquals(OpSchema.INPLACE_ALLOWED, bn.get(2).rule());
    OpSchema ar = OpSchema.of("Allreduce");
    assertEquals(1, ar.inplaceShift());
    assertEquals(Integer.MAX_VALUE, ar.maxInputs());
    OpSchema relu = OpSchema.of("Relu");
    assertEquals(Dp.buildInfo().cuda, relu.hasKernel(Dp.DEVICE_CUDA));
    assertTrue(relu.engines(Dp.DEVICE_CPU).isEmpty());
    assertEquals(OpSchema.GRADIENT_NOT_DIFFERENTIABLE, OpSchema.of("Accuracy").gradient());
    assertEquals(OpSchema.GRADIENT_STOP, OpSchema.of("StopGradient").gradient());
    assertEquals(OpSchema.GRADIENT_UNDECLARED, OpSchema.of("ReluGradient").gradient());
    assertEquals(OpSchema.GRADIENT_DIFFERENTIABLE, OpSchema.of("Div").gradient());
  }

  @Test
  void unknownTypesNameTheNearest() {
    DpNotFoundException e = assertThrows(DpNotFoundException.class, () -> OpSchema.of("Relux"));
    assertTrue(e.getMessage().contains("did you mean 'Relu'?"), e.getMessage());
    assertThrows(DpInvalidArgumentException.class, () -> OpSchema.of("Relu\0x"));
    assertThrows(DpInvalidArgumentException.class, () -> OpSchema.of(null));
    DpInvalidNetException n = assertThrows(DpInvalidNetException.class, () -> NetDef.fromJson(
        "{\"external_inputs\":[\"x\"],\"ops\":[{\"type\":\"Relux\",\"inputs\":[\"x\"],\"outputs\":[\"y\"]}]}"));
    assertTrue(n.getMessage().contains("did you mean 'Relu'?"), n.getMessage());
  }
}
