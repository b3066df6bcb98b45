#include "runtime/stderr_filter.h"

#include <unistd.h>

#include <cstring>

namespace torch_tpu::runtime {

StderrFilter::StderrFilter(std::string drop) : drop_(std::move(drop)) {
  std::fflush(stderr);
  capture_ = std::tmpfile();
  if (capture_ == nullptr) return;  // no filtering: the noise gets through
  saved_fd_ = ::dup(2);
  if (saved_fd_ < 0 || ::dup2(::fileno(capture_), 2) < 0) {
    if (saved_fd_ >= 0) ::close(saved_fd_);
    saved_fd_ = -1;
    std::fclose(capture_);
    capture_ = nullptr;
  }
}

StderrFilter::~StderrFilter() {
  if (capture_ == nullptr) return;
  std::fflush(stderr);
  ::dup2(saved_fd_, 2);
  ::close(saved_fd_);
  std::rewind(capture_);
  char* line = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = ::getline(&line, &cap, capture_)) > 0) {
    if (std::strstr(line, drop_.c_str()) != nullptr) continue;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(2, line + done, static_cast<size_t>(n - done));
      if (w <= 0) break;
      done += w;
    }
  }
  std::free(line);
  std::fclose(capture_);
}

}  // namespace torch_tpu::runtime
