// `--html FILE` for `check` and `compare`: the file is opened before anything runs, so an
// unwritable path is a command-line error (exit 2), and removed again unless the page was
// written whole, so an input or a stage that fails leaves no half-written page behind.
#pragma once

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <system_error>

#include <CLI/CLI.hpp>

namespace ad::cli {

class HtmlFile {
 public:
  explicit HtmlFile(std::string path) : path_(std::move(path)) {
    if (path_.empty()) return;
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) throw CLI::ValidationError("--html", "cannot write " + path_);
  }
  HtmlFile(const HtmlFile&) = delete;
  HtmlFile& operator=(const HtmlFile&) = delete;
  ~HtmlFile() {
    if (path_.empty() || written_) return;
    out_.close();
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }

  bool wanted() const { return !path_.empty(); }

  void write(const std::string& page) {
    out_ << page;
    out_.close();
    if (!out_) throw std::runtime_error("writing " + path_ + " failed");
    written_ = true;
  }

 private:
  std::string path_;
  std::ofstream out_;
  bool written_ = false;
};

}  // namespace ad::cli
