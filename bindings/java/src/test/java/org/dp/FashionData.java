package org.dp;

/**
 * The C sample's data path, ported exactly (samples/train_fashion_mnist.c): images standardised in
 * float arithmetic. Its batches come from dp's input pipeline ({@link Loader}).
 */
final class FashionData {
  static final int PIXELS = 28 * 28;
  final float[] x;
  final int[] y;
  final int n;

  private FashionData(float[] x, int[] y, int n) {
    this.x = x;
    this.y = y;
    this.n = n;
  }

  static FashionData load(String dir, String split) {
    try (Tensor images = Tensor.fromIdxFile(dir + "/" + split + "-images-idx3-ubyte.gz");
         Tensor labels = Tensor.fromIdxFile(dir + "/" + split + "-labels-idx1-ubyte.gz")) {
      long[] d = images.dims();
      if (images.dtype() != DType.UINT8 || d.length != 3 || d[1] != 28 || d[2] != 28) {
        throw new IllegalStateException("not a uint8 [N, 28, 28] image file");
      }
      int n = (int) d[0];
      byte[] px = images.toByteArray();
      float[] x = new float[n * PIXELS];
      final float mean = 0.2860f, invStd = 1.0f / 0.3530f;
      for (int i = 0; i < x.length; ++i) x[i] = ((float) (px[i] & 0xff) * (1.0f / 255.0f) - mean) * invStd;
      int[] y = new int[n];
      if (labels.dtype() == DType.UINT8) {
        byte[] l = labels.toByteArray();
        for (int i = 0; i < n; ++i) y[i] = l[i] & 0xff;
      } else {
        y = labels.toIntArray();
      }
      return new FashionData(x, y, n);
    }
  }

  /** The first n samples as tensors: "data" [n, 1, 28, 28] and "label" [n] (copies). */
  Tensor[] tensors(int n) {
    return new Tensor[] {Tensor.of(java.util.Arrays.copyOf(x, n * PIXELS), n, 1, 28, 28),
        Tensor.of(java.util.Arrays.copyOf(y, n), n)};
  }
}
