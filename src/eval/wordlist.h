// The words of the needle keys ("adjective-noun", as RULER draws them from wonderwords): two
// lists compiled into the binary, so the synthetic tasks need no data file.
#pragma once

#include <string>
#include <vector>

namespace golinear::eval {

const std::vector<std::string>& needle_adjectives();
const std::vector<std::string>& needle_nouns();

}  // namespace golinear::eval
