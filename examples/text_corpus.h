// A text corpus for language-model training: fortune(6)'s cookie files (entries separated by lines
// holding a single '%'), byte-level tokens, a train/validation split by entry and the windows of
// tokens a next-token model trains on.
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tapegraph.h"

namespace text {

// Tokens are bytes: the vocabulary is all 256 of them, so any text round-trips.
constexpr int64_t kVocabSize = 256;

// The corpus's two parts as token ids.
struct Corpus {
  std::vector<int64_t> train;
  std::vector<int64_t> validation;
  int64_t entries = 0;  // fortunes in the file
};

// Reads `path` and splits it into entries at lines of a single '%'; every `every`-th entry (the
// last of each group) goes to validation, the rest to training, each entry followed by "%\n" as in
// the file, so the model learns where one ends. A missing, unreadable or empty file is an error
// that says how to fetch the corpus.
inline Corpus load_corpus(const std::string& path, int every = 20) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read the corpus \"" + path + "\" (fetch it with examples/fetch_fortunes.sh, "
                             "or pass --data with a fortune-format text file)");
  }
  std::ostringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  Corpus corpus;
  std::string entry;
  auto flush = [&] {
    if (entry.empty()) return;
    std::vector<int64_t>& out = (corpus.entries % every == every - 1) ? corpus.validation : corpus.train;
    for (unsigned char c : entry + "%\n") out.push_back(c);
    ++corpus.entries;
    entry.clear();
  };
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line == "%") flush();
    else entry += line + "\n";
  }
  flush();
  if (corpus.train.empty() || corpus.validation.empty()) {
    throw std::runtime_error("the corpus \"" + path + "\" holds " + std::to_string(corpus.entries) +
                             " entries; at least " + std::to_string(every) + " are needed for a validation split");
  }
  return corpus;
}

// The entropy in nats of the tokens' frequencies: the loss of the best model that ignores context.
inline double unigram_entropy(const std::vector<int64_t>& tokens) {
  std::vector<double> count(kVocabSize, 0.0);
  for (int64_t t : tokens) count[static_cast<size_t>(t)] += 1;
  double h = 0;
  for (double c : count) {
    if (c > 0) h -= c / static_cast<double>(tokens.size()) * std::log(c / static_cast<double>(tokens.size()));
  }
  return h;
}

// Inputs and next-token targets: windows of `context` tokens starting every `stride` tokens.
struct Windows {
  tg::Tensor inputs;   // [n, context] int64
  tg::Tensor targets;  // [n, context] int64, inputs shifted by one token
};

// Every window of `tokens` that starts at a multiple of `stride` and has its targets inside it.
inline Windows make_windows(const std::vector<int64_t>& tokens, int64_t context, int64_t stride) {
  const auto n_tokens = static_cast<int64_t>(tokens.size());
  const int64_t n = n_tokens > context ? (n_tokens - context - 1) / stride + 1 : 0;
  if (n <= 0) {
    throw std::runtime_error("a context of " + std::to_string(context) + " tokens needs more than the " +
                             std::to_string(n_tokens) + " tokens of this split");
  }
  std::vector<int64_t> x(static_cast<size_t>(n * context)), y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t t = 0; t < context; ++t) {
      x[static_cast<size_t>(i * context + t)] = tokens[static_cast<size_t>(i * stride + t)];
      y[static_cast<size_t>(i * context + t)] = tokens[static_cast<size_t>(i * stride + t + 1)];
    }
  }
  return {tg::from_vector(x, {n, context}), tg::from_vector(y, {n, context})};
}

// Token ids as text (bytes as they are).
inline std::string decode(const std::vector<int64_t>& tokens) {
  std::string s;
  for (int64_t t : tokens) s.push_back(static_cast<char>(t));
  return s;
}

}  // namespace text
