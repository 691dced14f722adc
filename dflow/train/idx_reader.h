// Readers for the idx files of MNIST and Fashion-MNIST, gzip-compressed or
// plain (zlib reads both).
//
// An idx file is a big-endian header followed by row-major data:
//   bytes 0..3   magic: 0x00 0x00 <type> <ndims>; type 0x08 = unsigned byte
//   then ndims   uint32 dimension sizes
//   then         prod(dims) elements
// Images are magic 0x00000803 ([N, rows, cols]); labels 0x00000801 ([N]).
// Offsets in error messages count bytes of the decompressed stream.
//
//   ASSIGN_OR_RETURN(IdxImages images, ReadIdxImages(dir + "/train-images-idx3-ubyte.gz"));
#ifndef DFLOW_TRAIN_IDX_READER_H_
#define DFLOW_TRAIN_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace dflow {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// uint8 images, row-major [count, rows, cols].
struct IdxImages {
  int64_t count = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  std::vector<uint8_t> pixels;
};

// Reads an idx3 image file. Errors: NotFound when `path` does not exist,
// PermissionDenied when it cannot be opened, DataLoss naming the file and
// offset for a bad magic, a short read (truncated or corrupt gzip), a failed
// gzip checksum or trailing bytes after the data the header announces.
absl::StatusOr<IdxImages> ReadIdxImages(const std::string& path);

// Reads an idx1 label file; errors as ReadIdxImages.
absl::StatusOr<std::vector<uint8_t>> ReadIdxLabels(const std::string& path);

struct IdxExamples {
  IdxImages images;
  std::vector<uint8_t> labels;  // One per image.
};

// Reads an image file and its label file; DataLoss naming both files when
// their counts differ.
absl::StatusOr<IdxExamples> ReadIdxExamples(const std::string& images_path,
                                            const std::string& labels_path);

}  // namespace dflow

#endif  // DFLOW_TRAIN_IDX_READER_H_
