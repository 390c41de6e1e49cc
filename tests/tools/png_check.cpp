// ld-png-check FILE.png: prints "WIDTH HEIGHT INK_PIXELS COLOURS" for a screenshot, so
// scripts/html_check.sh can tell a rendered report from a blank page. INK_PIXELS are pixels
// that are not (near) white; COLOURS counts distinct RGB values (capped at 65536).
// Reads the PNGs Chromium writes: 8-bit grey/RGB/RGBA (+alpha), not interlaced.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

struct Image {
  uint32_t width = 0, height = 0;
  unsigned channels = 0;              // 1 grey, 2 grey+alpha, 3 RGB, 4 RGBA
  std::vector<unsigned char> pixels;  // unfiltered rows, width * channels bytes each
};

unsigned channels_of(unsigned colour_type) {
  switch (colour_type) {
    case 0: return 1;
    case 2: return 3;
    case 4: return 2;
    case 6: return 4;
    default: throw std::runtime_error("unsupported PNG colour type " + std::to_string(colour_type));
  }
}

int paeth(int a, int b, int c) {
  const int p = a + b - c;
  const int pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

// Undoes the per-row filters of PNG (spec section 9).
void unfilter(Image& img, const std::vector<unsigned char>& raw) {
  const size_t stride = size_t{img.width} * img.channels;
  img.pixels.assign(stride * img.height, 0);
  for (uint32_t y = 0; y < img.height; ++y) {
    const unsigned char filter = raw[y * (stride + 1)];
    const unsigned char* in = &raw[y * (stride + 1) + 1];
    unsigned char* out = &img.pixels[y * stride];
    const unsigned char* up = y ? out - stride : nullptr;
    for (size_t x = 0; x < stride; ++x) {
      const int a = x >= img.channels ? out[x - img.channels] : 0;
      const int b = up ? up[x] : 0;
      const int c = (up && x >= img.channels) ? up[x - img.channels] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: pred = paeth(a, b, c); break;
        default: throw std::runtime_error("bad PNG filter " + std::to_string(filter));
      }
      out[x] = static_cast<unsigned char>(in[x] + pred);
    }
  }
}

Image read_png(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  const std::vector<unsigned char> data((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  static const unsigned char kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (data.size() < 8 || !std::equal(kSignature, kSignature + 8, data.begin()))
    throw std::runtime_error(path + ": not a PNG");
  Image img;
  std::vector<unsigned char> compressed;
  for (size_t at = 8; at + 12 <= data.size();) {
    const uint32_t len = be32(&data[at]);
    if (len > data.size() - at - 12) throw std::runtime_error(path + ": truncated chunk");
    const std::string type(reinterpret_cast<const char*>(&data[at + 4]), 4);
    const unsigned char* body = &data[at + 8];
    if (type == "IHDR" && len >= 13) {
      img.width = be32(body);
      img.height = be32(body + 4);
      if (body[8] != 8) throw std::runtime_error("unsupported PNG bit depth " + std::to_string(body[8]));
      if (body[12] != 0) throw std::runtime_error("interlaced PNG not supported");
      img.channels = channels_of(body[9]);
    } else if (type == "IDAT") {
      compressed.insert(compressed.end(), body, body + len);
    } else if (type == "IEND") {
      break;
    }
    at += 12 + len;
  }
  if (!img.width || !img.height || img.width > 20000 || img.height > 40000)
    throw std::runtime_error(path + ": missing or absurd IHDR");
  std::vector<unsigned char> raw((size_t{img.width} * img.channels + 1) * img.height);
  uLongf raw_len = raw.size();
  if (uncompress(raw.data(), &raw_len, compressed.data(), compressed.size()) != Z_OK || raw_len != raw.size())
    throw std::runtime_error(path + ": image data does not inflate to its size");
  unfilter(img, raw);
  return img;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: ld-png-check FILE.png\n");
    return 1;
  }
  try {
    const Image img = read_png(argv[1]);
    uint64_t ink = 0;
    std::unordered_set<uint32_t> colours;
    for (size_t i = 0; i < img.pixels.size(); i += img.channels) {
      const unsigned char r = img.pixels[i];
      const unsigned char g = img.channels >= 3 ? img.pixels[i + 1] : r;
      const unsigned char b = img.channels >= 3 ? img.pixels[i + 2] : r;
      if (r < 245 || g < 245 || b < 245) ink++;
      if (colours.size() < 65536) colours.insert((uint32_t{r} << 16) | (uint32_t{g} << 8) | b);
    }
    std::printf("%u %u %llu %zu\n", img.width, img.height, static_cast<unsigned long long>(ink), colours.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ld-png-check: %s\n", e.what());
    return 2;
  }
}
