#include "eval/wordlist.h"

namespace golinear::eval {

const std::vector<std::string>& needle_adjectives() {
  static const std::vector<std::string> words = {
      "abrupt", "absent", "acidic", "adorable", "agile", "airy", "amber", "ancient", "anxious",
      "arctic", "awake", "bashful", "bitter", "blushing", "bold", "brave", "breezy", "bright",
      "brisk", "broad", "bumpy", "calm", "careful", "cheerful", "chilly", "clever", "cloudy",
      "clumsy", "coastal", "cozy", "crimson", "crisp", "curious", "daring", "dazzling", "deep",
      "dusty", "eager", "early", "earnest", "elegant", "empty", "fancy", "fearless", "fierce",
      "fluffy", "foggy", "fragile", "frosty", "gentle", "giant", "gleaming", "glossy", "golden",
      "graceful", "grumpy", "hasty", "hollow", "humble", "icy", "idle", "jolly", "juicy", "keen",
      "lively", "lonely", "loud", "lucky", "mellow", "mighty", "misty", "modest", "muddy", "narrow",
      "nimble", "noisy", "odd", "orange", "patient", "plain", "polite", "proud", "quick", "quiet",
      "rapid", "rare", "restless", "rocky", "rosy", "rough", "rusty", "salty", "scarlet", "shaggy",
      "shiny", "silent", "silky", "sleepy", "slim", "smooth", "snowy", "sober", "solid", "sour",
      "spicy", "steady", "sticky", "stormy", "sturdy", "sunny", "swift", "tame", "tender", "thirsty",
      "tidy", "tiny", "tough", "vast", "velvet", "vivid", "wandering", "warm", "wary", "weary",
      "wild", "windy", "wise", "witty", "wooden", "young", "zealous",
  };
  return words;
}

const std::vector<std::string>& needle_nouns() {
  static const std::vector<std::string> words = {
      "acorn", "anchor", "apple", "arrow", "badger", "bakery", "balloon", "banjo", "barrel",
      "basket", "beacon", "beetle", "bell", "blanket", "boat", "bonnet", "bottle", "bridge",
      "bucket", "button", "cabin", "camel", "candle", "canyon", "carpet", "castle", "cellar",
      "chimney", "cider", "cliff", "clock", "cobbler", "comet", "compass", "cottage", "crayon",
      "crow", "cup", "daisy", "desert", "dolphin", "drum", "eagle", "falcon", "feather", "fiddle",
      "forest", "fountain", "garden", "glacier", "goblet", "harbor", "harp", "hammer", "hedge",
      "helmet", "island", "jacket", "kettle", "kite", "ladder", "lantern", "lemon", "lighthouse",
      "lizard", "locket", "magnet", "maple", "meadow", "mirror", "mitten", "monkey", "needle",
      "orchard", "otter", "owl", "paddle", "parrot", "pebble", "pepper", "piano", "pillow", "pine",
      "pirate", "planet", "pocket", "pond", "puppet", "quilt", "rabbit", "raven", "ribbon", "river",
      "robin", "rocket", "saddle", "sailor", "scarf", "shovel", "skate", "sparrow", "spoon",
      "squirrel", "statue", "stove", "teapot", "thimble", "thunder", "tiger", "tomato", "tractor",
      "trumpet", "tulip", "turtle", "umbrella", "valley", "violin", "wagon", "walnut", "whale",
      "whistle", "willow", "window", "wizard", "zebra",
  };
  return words;
}

}  // namespace golinear::eval
