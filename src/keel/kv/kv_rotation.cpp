// The fast Walsh-Hadamard transform used to rotate rows before quantizing below 8 bits.
#include <cmath>
#include <string>

#include "keel/kv/kv_format.h"
#include "keel/util/error.h"

namespace keel::kv {

void fwht(float* x, int64_t n) {
  if (n <= 0 || (n & (n - 1)) != 0) throw Error("fwht needs a power-of-two length, got " + std::to_string(n));
  for (int64_t h = 1; h < n; h *= 2) {
    for (int64_t i = 0; i < n; i += 2 * h) {
      for (int64_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  // Scaling by 1/sqrt(n) makes it orthonormal; H * H = n * I, so the scaled transform is its own inverse.
  const float norm = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
  for (int64_t i = 0; i < n; ++i) x[i] *= norm;
}

void rotate_row(float* x, int64_t dim) {
  if (dim <= 0) throw Error("cannot rotate a row of " + std::to_string(dim) + " values");
  const int64_t block = dim & -dim;  // largest power of two dividing dim
  for (int64_t i = 0; i < dim; i += block) fwht(x + i, block);
}

}  // namespace keel::kv
