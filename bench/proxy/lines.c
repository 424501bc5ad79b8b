// The filter behind bench/proxy/lines.sh: reads valgrind lackey's `--trace-mem=yes` trace on
// stdin and lists the distinct 64-byte cache lines the data accesses touch between two runs
// of a marker instruction (a function the proxy runs once per request): one request cycle's
// working set, whatever the cache.
//
// For each window after the first SKIP (the warm-up) it prints `W index lines written`, then
// one row per line touched: its address, the instruction that touched it first, and whether
// the window wrote it (0/1), in hex. The script reads them.
// Usage: lines MARKER_HEX SKIP < trace > windows
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define SET (1u << 20)

// Lines touched in the current window: open addressing, cleared through the list of used slots.
static uint64_t line_key[SET];
static uint32_t line_at[SET]; // index into the window's arrays
static uint32_t used[SET], nused;
static uint64_t win_line[SET], win_site[SET];
static uint8_t win_written[SET];
static uint32_t nwin;

static uint64_t mix(uint64_t x) { return x * 0x9E3779B97F4A7C15ull; }

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: lines MARKER_HEX SKIP < trace > windows\n");
    return 2;
  }
  uint64_t marker = strtoull(argv[1], 0, 16);
  long skip = atol(argv[2]);
  char buf[256];
  long win = -1, printed = 0;
  uint64_t site = 0;
  while (fgets(buf, sizeof buf, stdin)) {
    if (buf[0] == 'I') {
      site = strtoull(buf + 3, 0, 16);
      if (site != marker)
        continue;
      if (win >= skip) {
        uint32_t written = 0;
        for (uint32_t i = 0; i < nwin; i++)
          written += win_written[i];
        printf("W %ld %u %u\n", win, nwin, written);
        for (uint32_t i = 0; i < nwin; i++)
          printf("%lx %lx %u\n", (unsigned long)(win_line[i] << 6), (unsigned long)win_site[i],
                 win_written[i]);
        printed++;
      }
      for (uint32_t i = 0; i < nused; i++)
        line_key[used[i]] = 0;
      nused = nwin = 0;
      win++;
      continue;
    }
    // Data accesses: " L addr,size", " S addr,size", " M addr,size" (a modify is a write).
    if (buf[0] != ' ' || win < skip)
      continue;
    char *end;
    uint64_t addr = strtoull(buf + 3, &end, 16);
    uint64_t size = strtoull(end + 1, 0, 10);
    uint8_t written = buf[1] != 'L';
    uint64_t last = (addr + (size ? size : 1) - 1) >> 6;
    for (uint64_t line = addr >> 6; line <= last; line++) {
      for (uint64_t h = mix(line) >> 44;; h++) {
        h &= SET - 1;
        if (line_key[h] == line + 1) {
          win_written[line_at[h]] |= written;
          break;
        }
        if (!line_key[h]) {
          if (nused >= SET / 2)
            break; // a runaway window: the script leaves it out as periodic work anyway
          line_key[h] = line + 1;
          used[nused++] = (uint32_t)h;
          line_at[h] = nwin;
          win_line[nwin] = line;
          win_site[nwin] = site;
          win_written[nwin] = written;
          nwin++;
          break;
        }
      }
    }
  }
  if (!printed) {
    fprintf(stderr, "no window after the warm-up (%ld windows): was the marker run?\n", win);
    return 1;
  }
  return 0;
}
