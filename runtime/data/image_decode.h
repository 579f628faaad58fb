/*
 * image_decode.h - one JPEG or PNG file, held in memory, decoded into C x H x W float values
 * 0..255 the way torchvision's ImageFolder + Resize(min(H, W)) + CenterCrop((H, W)) sees it.
 * Used by the image-folder reader (imagefolder.c), the fuzz harness and benchmarks.
 */
#ifndef DT_RUNTIME_DATA_IMAGE_DECODE_H
#define DT_RUNTIME_DATA_IMAGE_DECODE_H

#include "dtrain.h"

#include <stddef.h>

/* The most pixels (width x height) a file may claim before anything is allocated: 2^28, 16384 x
 * 16384, far above any photo a classifier is trained on; and the largest target side. */
#define IMG_MAX_PIXELS (1u << 28)
#define IMG_MAX_SIDE 4096

/* flags for image_decode */
#define IMG_NO_DCT_SCALE 1u /* decode JPEGs at full size (for benchmarks and tests) */

/* Decodes data[0..len) (a JPEG or PNG, told apart by the magic bytes, whatever the name says)
 * into out: c x h x w floats in 0..255, channel-major (CHW), c = 1 (gray) or 3 (RGB).
 *   - JPEG by TurboJPEG, PNG by libpng; RGBA, gray+alpha and palette transparency lose their
 *     alpha (dropped, not composited: PIL's convert("RGB") does the same), 16-bit samples keep
 *     their high byte (as PIL for 16-bit RGB; PIL opens a 16-bit gray PNG as 32-bit integers and
 *     its convert clips them to 255, almost all white, which dtrain does not copy), palette
 *     images become RGB, CMYK/YCCK JPEGs become RGB
 *     (R = C*K/255 on Adobe's inverted values, as PIL). Gray from RGB is ITU-R 601 luma
 *     (PIL's convert("L") formula); a gray image read as RGB repeats its one channel.
 *   - The shorter side is resized to min(h, w), the other side to floor(min(h, w) * long / short)
 *     (torchvision's Resize), then the centre h x w is cut out, zero-padded where the resized
 *     image is smaller (torchvision's CenterCrop, with Python's round-half-even offsets).
 *   - Unless flags has IMG_NO_DCT_SCALE, a JPEG is decoded at the smallest DCT scaling factor
 *     (1/8, 1/4 or 1/2; else full size) whose scaled shorter side is still at least 2 min(h, w)
 *     (PIL's reducing_gap of 2), which makes a large photo several times faster to decode; the
 *     resize then starts from that smaller image, within a level or so of a full-size decode.
 * name is the file's name for messages. Thread-safe (each call has its own decoder state).
 * DT_ERR_CORRUPT: not JPEG/PNG, truncated, undecodable, or more than IMG_MAX_PIXELS (the message
 * names the file and the library's words). DT_ERR_INVALID_ARG: a bad c, h or w. DT_ERR_NOMEM. */
dt_status image_decode(const char *name, const unsigned char *data, size_t len, int c, int h, int w, unsigned flags,
                       float *out);

#endif
