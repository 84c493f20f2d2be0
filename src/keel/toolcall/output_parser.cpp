// The streaming engine shared by every format. It keeps the output not yet accounted for in a
// buffer and, each time text arrives, finds the earliest place where a marker (or a bare JSON
// call) starts or could start. Text before it is released; from it on the text is held until the
// marker's matcher says what it is. Every decision depends only on the buffered text (and on
// whether the output has ended), never on where the pieces were cut, so feeding the same output
// in any split gives the same events once adjacent deltas are joined.
//
// Whitespace right before and right after a marker is dropped (it separates calls from text and
// from each other); trailing whitespace is therefore held until something that is not a marker
// follows it. An unfinished UTF-8 character is held too, so every delta is valid UTF-8 whenever
// the output is.
#include <algorithm>

#include "keel/toolcall/call_matchers.h"
#include "keel/toolcall/tool_call_parser.h"

namespace keel::toolcall {
namespace {

using detail::Match;
using detail::Opener;
using detail::Region;

// The last bytes of every closing marker, value end and header the matchers wait for.
constexpr std::string_view kDecisiveBytes = "}]>|\"\n";

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Bytes at the end of `s` that begin a UTF-8 character still missing its continuation bytes.
size_t unfinished_utf8_tail(std::string_view s) {
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    const auto c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for the lead
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

class StreamingOutputParser final : public OutputParser {
 public:
  explicit StreamingOutputParser(const OutputParserOptions& options)
      : region_(options.starts_in_reasoning ? Region::Reasoning : Region::Text),
        text_openers_(detail::openers_for(options.format, Region::Text, options.reasoning || options.starts_in_reasoning)),
        reasoning_openers_(detail::openers_for(options.format, Region::Reasoning, true)),
        separators_(detail::separators_for(options.format)) {}

  void feed(std::string_view chunk, std::vector<ParseEvent>& events) override {
    if (finished_) return;
    buf_.append(chunk);
    pump(false, events);
  }

  void finish(std::vector<ParseEvent>& events) override {
    if (finished_) return;
    pump(true, events);
    finished_ = true;
  }

  bool in_reasoning() const override { return region_ == Region::Reasoning; }
  size_t held_bytes() const override { return buf_.size(); }

 private:
  struct Candidate {
    size_t pos;
    const Opener* opener;  // nullptr: none in the buffer
    bool partial;          // the buffer ends inside the marker
  };

  // Whether a LineStart opener may begin at rest[i]: only spaces or tabs since the last newline.
  bool at_line_start(std::string_view rest, size_t i) const {
    while (i > 0 && (rest[i - 1] == ' ' || rest[i - 1] == '\t')) --i;
    return i == 0 ? line_start_ : rest[i - 1] == '\n';
  }

  Candidate find_candidate(std::string_view rest, bool eof) const {
    const std::vector<Opener>& openers = region_ == Region::Text ? text_openers_ : reasoning_openers_;
    for (size_t i = 0; i < rest.size(); ++i) {
      const Opener* partial = nullptr;
      for (const Opener& op : openers) {
        if (op.marker[0] != rest[i]) continue;
        if (op.where == Opener::Where::OutputStart && !(i == 0 && output_start_)) continue;
        if (op.where == Opener::Where::LineStart && !at_line_start(rest, i)) continue;
        const std::string_view here = rest.substr(i);
        if (here.size() >= op.marker.size()) {
          if (here.substr(0, op.marker.size()) == op.marker) return {i, &op, false};
        } else if (!eof && op.marker.substr(0, here.size()) == here && partial == nullptr) {
          partial = &op;
        }
      }
      if (partial != nullptr) return {i, partial, true};
    }
    return {rest.size(), nullptr, false};
  }

  // Matchers rescan a call from its start each time, which for a long call fed token by token
  // would cost time quadratic in its length. A matcher's answer only ever changes from NeedMore
  // once more text arrives, and asking it later gives the same answer it would have given
  // earlier, so asking less often changes nothing but latency. It is asked again when a byte
  // that can end a value or a marker arrives, or when the call has doubled since it was asked.
  bool can_wait(std::string_view at) {
    if (undecided_size_ == 0 || at.size() < undecided_size_ || at.size() >= 2 * undecided_size_) return false;
    // Only the bytes not looked at before, or the wait itself turns quadratic.
    const size_t from = std::max(undecided_size_, waited_size_);
    if (from < at.size() && at.substr(from).find_first_of(kDecisiveBytes) != std::string_view::npos) return false;
    waited_size_ = at.size();
    return true;
  }

  void emit_text(std::string_view text, std::vector<ParseEvent>& events) {
    if (text.empty()) return;
    const ParseEvent::Kind kind = region_ == Region::Text ? ParseEvent::Kind::Text : ParseEvent::Kind::Reasoning;
    if (events.size() > first_event_ && events.back().kind == kind) {
      events.back().text.append(text);
    } else {
      events.push_back({kind, std::string(text), {}});
    }
    line_start_ = text.back() == '\n';
    output_start_ = false;
  }

  void pump(bool eof, std::vector<ParseEvent>& events) {
    first_event_ = events.size();
    size_t pos = 0;
    while (pos < buf_.size()) {
      const std::string_view rest = std::string_view(buf_).substr(pos);
      if (drop_space_) {
        size_t k = 0;
        while (k < rest.size() && (is_space(rest[k]) || separators_.find(rest[k]) != std::string_view::npos)) ++k;
        pos += k;
        if (k == rest.size()) break;
        drop_space_ = false;
        continue;
      }
      const Candidate c = find_candidate(rest, eof);
      if (c.opener == nullptr) {
        size_t release = rest.size();
        if (!eof) {
          const size_t tail = unfinished_utf8_tail(rest);
          release -= tail;
          if (tail == 0) {
            while (release > 0 && is_space(rest[release - 1])) --release;
          }
        }
        emit_text(rest.substr(0, release), events);
        pos += release;
        break;
      }
      // Whitespace right before a marker is held with it: dropped if it opens something.
      size_t release = c.pos;
      while (release > 0 && is_space(rest[release - 1])) --release;
      emit_text(rest.substr(0, release), events);
      pos += release;
      if (c.partial) break;

      const std::string_view at = rest.substr(c.pos);
      if (!eof && can_wait(at)) break;
      Match m = c.opener->match(at, c.opener->marker.size(), eof);
      if (m.status == Match::Status::NeedMore) {
        if (!eof) {
          undecided_size_ = at.size();
          waited_size_ = 0;
          break;
        }
        m = detail::not_call(c.opener->marker.size());  // a matcher must decide at eof; never loop
      }
      undecided_size_ = 0;
      const size_t length = std::max<size_t>(m.length, 1);
      if (m.status == Match::Status::NotCall) {
        emit_text(rest.substr(release, c.pos - release + length), events);
        pos += c.pos - release + length;
        continue;
      }
      pos += c.pos - release + length;
      for (ParsedCall& call : m.calls) events.push_back({ParseEvent::Kind::Call, "", std::move(call)});
      if (m.enter) region_ = *m.enter;
      line_start_ = true;
      output_start_ = false;
      drop_space_ = true;
    }
    buf_.erase(0, pos);
    if (eof && !buf_.empty()) {
      // Only dropped whitespace can be left; nothing else may stay unaccounted for.
      buf_.clear();
    }
  }

  Region region_;
  std::vector<Opener> text_openers_;
  std::vector<Opener> reasoning_openers_;
  std::string_view separators_;
  std::string buf_;
  bool line_start_ = true;   // the byte before buf_ ends a line, or the output starts with buf_
  bool output_start_ = true;
  bool drop_space_ = true;   // leading whitespace of the turn, and after each marker, is dropped
  bool finished_ = false;
  size_t first_event_ = 0;   // deltas are only merged into events appended by the same call
  size_t undecided_size_ = 0;  // size of the text from the pending marker on when its matcher said NeedMore
  size_t waited_size_ = 0;     // how much of it can_wait() has already looked through
};

}  // namespace

std::unique_ptr<OutputParser> make_output_parser(const OutputParserOptions& options) {
  return std::make_unique<StreamingOutputParser>(options);
}

std::vector<ParseEvent> coalesce_events(const std::vector<ParseEvent>& events) {
  std::vector<ParseEvent> out;
  for (const ParseEvent& e : events) {
    if (e.kind != ParseEvent::Kind::Call && e.text.empty()) continue;
    if (e.kind != ParseEvent::Kind::Call && !out.empty() && out.back().kind == e.kind) {
      out.back().text += e.text;
    } else {
      out.push_back(e);
    }
  }
  return out;
}

std::vector<ParseEvent> parse_output(const OutputParserOptions& options, std::string_view output) {
  std::vector<ParseEvent> events;
  auto parser = make_output_parser(options);
  parser->feed(output, events);
  parser->finish(events);
  return events;
}

}  // namespace keel::toolcall
