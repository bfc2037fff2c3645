#!/usr/bin/env bash
# Renders RUN_DIR/report.html in headless Chromium (Debian's `chromium` package) and fails when
# the page does not show its plots. The screenshot is kept as RUN_DIR/report-screenshot.png (or
# the path given as the second argument) for a person to look at.
#
# The check reads the PNG with Python's standard library only (zlib + PNG row filters) and
# measures two things:
#   - ink: pixels that are not near-white (text, tables, frames, plot lines);
#   - colour: strongly saturated pixels. Only the plot lines and legends are coloured (text,
#     grids and frames are grey), so a page whose SVG failed to render has almost none.
# Usage: scripts/check-report.sh RUN_DIR [SCREENSHOT.png]
# A sample run directory to check: HWTRAIN_REPORT_SAMPLE_DIR=/tmp/sample-run \
#   build/tests/test_obs --gtest_filter=Report.SampleRunDirectoryForBrowserCheck
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 RUN_DIR [SCREENSHOT.png]" >&2
  exit 2
fi
run_dir="$(cd "$1" && pwd)"
report="$run_dir/report.html"
shot="${2:-$run_dir/report-screenshot.png}"
if [ ! -f "$report" ]; then
  echo "check-report: no report.html in $run_dir (write one with: hwtrain report $run_dir)" >&2
  exit 1
fi
browser="$(command -v chromium || command -v chromium-browser || true)"
if [ -z "$browser" ]; then
  echo "check-report: chromium not found (install Debian's package: apt-get install -y chromium)" >&2
  exit 1
fi

rm -f "$shot"
# --no-sandbox: Chromium refuses to run as root with its sandbox (containers, CI).
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
  --window-size=1200,2400 --screenshot="$shot" "file://$report" >/dev/null 2>&1 || true
if [ ! -s "$shot" ]; then
  echo "check-report: chromium wrote no screenshot for $report" >&2
  exit 1
fi

python3 - "$shot" <<'EOF'
import struct, sys, zlib

path = sys.argv[1]
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    sys.exit(f"check-report: {path} is not a PNG")
pos, idat, width = 8, b"", 0
while pos < len(data):
    (length,) = struct.unpack(">I", data[pos:pos + 4])
    kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
    if kind == b"IHDR":
        width, height, depth, color_type = struct.unpack(">IIBB", body[:10])
        if depth != 8 or color_type not in (2, 6):
            sys.exit(f"check-report: unexpected PNG format (depth {depth}, colour type {color_type})")
        bpp = 3 if color_type == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + length
raw = zlib.decompress(idat)
stride = width * bpp
prev = bytearray(stride)
ink = colour = 0
for y in range(height):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):  # undo the PNG row filter
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    for x in range(0, stride, bpp):
        r, g, bl = line[x], line[x + 1], line[x + 2]
        if min(r, g, bl) < 235:
            ink += 1
        if max(r, g, bl) - min(r, g, bl) > 80:
            colour += 1
    prev = line
total = width * height
print(f"check-report: {path}: {width}x{height}, ink {100.0 * ink / total:.2f}%, "
      f"coloured (plot lines) {colour} px")
if ink < total * 0.01:
    sys.exit("check-report: FAIL: the page is (nearly) blank")
if colour < 1500:
    sys.exit("check-report: FAIL: no plot lines visible (the SVG plots did not render)")
print("check-report: OK")
EOF
