#pragma once
// The one way the engine and its front ends read an input file. A hostile or mistaken path must
// fail with a message, not hang or eat the memory: only regular files are read (a FIFO, a device
// such as /dev/zero or a socket is refused, checked on the opened descriptor so the answer is about
// the file actually read), and each kind of input has a size limit far above any real file of
// that kind.
#include <cstdint>
#include <string>

namespace dpv {

// What a file is read as: its name in messages and its size limit.
struct InputKind {
  const char* name;    // "model spec", used as "the 16 MiB limit for a model spec"
  uint64_t max_bytes;  // larger files are refused before any byte is read
};

inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;

// A model spec or a quiz file is a few KB; a lesson page some tens of KB; progress a few KB.
inline constexpr InputKind kModelSpecInput{"model spec", 16 * kMiB};
inline constexpr InputKind kQuizInput{"quiz file", 16 * kMiB};
inline constexpr InputKind kLessonInput{"lesson file", 16 * kMiB};
inline constexpr InputKind kProgressInput{"progress file", 16 * kMiB};
// A Chrome trace of a long run reaches hundreds of MB.
inline constexpr InputKind kTraceInput{"trace", 1 * kGiB};
// MNIST's training images are 47 MB; ImageNet-sized IDX files stay under this.
inline constexpr InputKind kIdxInput{"IDX file", 8 * kGiB};
// Checkpoints are the large ones: read whole into memory, as torch.load does.
inline constexpr InputKind kSafetensorsInput{"safetensors file", 64 * kGiB};

// Reads the whole of a regular file. Throws dpv::Error naming the path: the system's reason
// (file_error: FileNotFoundError, PermissionError, IsADirectoryError, ...), "not a regular file"
// (OSError) for a FIFO, device or socket, and "over the <limit> limit for a <kind>" (ValueError)
// for a file larger than kind.max_bytes.
std::string read_file(const std::string& path, const InputKind& kind);

// "16 MiB", "1 GiB", "4096 bytes": a limit as messages show it.
std::string describe_bytes(uint64_t bytes);

// What a file's mode says it is: "a FIFO", "a character device", ... for messages.
std::string describe_file_type(unsigned mode);

}  // namespace dpv
