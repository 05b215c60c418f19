package org.dp;

/**
 * The C sample's data path and shuffling, ported exactly (samples/train_fashion_mnist.c): images
 * standardised in float arithmetic, xorshift64* seeded through splitmix64, Fisher-Yates.
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

  /** xorshift64* with a splitmix64-scrambled seed, as in the C sample. */
  static final class Rng {
    private long state;

    Rng(long seed) {
      long z = seed + 0x9E3779B97F4A7C15L;
      z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
      z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
      z ^= z >>> 31;
      state = z != 0 ? z : 0x2545F4914F6CDD1DL;
    }

    long next() {
      state ^= state >>> 12;
      state ^= state << 25;
      state ^= state >>> 27;
      return state * 0x2545F4914F6CDD1DL;
    }

    void shuffle(int[] a, int n) {
      for (int i = n; i > 1; --i) {
        int j = (int) Long.remainderUnsigned(next(), i);
        int t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
      }
    }
  }

  /** Feeds rows idx[off .. off+b) as "data" [b,1,28,28] and "label" [b]. */
  void feedBatch(Workspace ws, int[] idx, int off, int b) {
    float[] bx = new float[b * PIXELS];
    int[] by = new int[b];
    for (int i = 0; i < b; ++i) {
      int r = idx == null ? off + i : idx[off + i];
      System.arraycopy(x, r * PIXELS, bx, i * PIXELS, PIXELS);
      by[i] = y[r];
    }
    ws.feed("data", bx, b, 1, 28, 28);
    ws.feed("label", by, b);
  }
}
