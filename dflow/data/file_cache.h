// CacheDataset(V2) with a file name: the input's elements cached in a tensor
// bundle at that prefix, in TensorFlow's cache file layout, so either can
// read what the other wrote:
//
//   PREFIX.index, PREFIX.data-00000-of-00001   the finished cache: element i's
//                                              component j under the key
//                                              printf("%7zu_%Nzu", i, j), N the
//                                              width of (components - 1)
//   PREFIX_0.lockfile, PREFIX_0.*              while an iterator writes it
//
// An iterator made while PREFIX.index exists reads the cache; otherwise it
// passes the input through and writes the cache, finishing it (bundle
// written as PREFIX_0, merged into PREFIX, lockfile removed) when the input
// ends. An iterator destroyed before that deletes what it wrote, as
// TensorFlow's does (a cache never holds part of the input).
#ifndef DFLOW_DATA_FILE_CACHE_H_
#define DFLOW_DATA_FILE_CACHE_H_

#include <memory>
#include <string>

#include "dflow/data/dataset.h"

namespace dflow::data {

// `what` names the op in messages ("CacheDatasetV2 'cache'").
std::shared_ptr<const DatasetBase> MakeFileCacheDataset(std::shared_ptr<const DatasetBase> input,
                                                        std::string filename, std::string what);

}  // namespace dflow::data

#endif  // DFLOW_DATA_FILE_CACHE_H_
