/**
 * Images a tool returns (an MCP server's image content), checked before they are kept. A tool server is
 * untrusted: its declared MIME type may be wrong, its base64 may not be base64, and its image may be too
 * large for a provider. An image the providers would refuse is never stored with the message, because
 * the conversation is re-sent on every later step and one refused image would fail them all. Such an
 * image is described in the result's text instead, and so is every image past the count limit.
 *
 * The format is read from the bytes (PNG, JPEG, GIF, WebP: what both providers accept), not from what
 * the server declares, and so are the dimensions.
 */
import type { ImageMediaType, ToolResultImage } from '../llm/types';

/**
 * The largest image kept, in decoded bytes: under Anthropic's 5 MB per image with room for base64,
 * and small enough for the message row that holds it, which every later step of the session reads.
 */
export const TOOL_IMAGE_MAX_BYTES = 2 * 1024 * 1024;
/** Images one result may carry; the rest are described. Each costs prompt tokens on every later step. */
export const TOOL_IMAGES_PER_RESULT_MAX = 4;
/** The longest side accepted, in pixels: Anthropic refuses an image with a side over 8,000 px. */
export const TOOL_IMAGE_MAX_SIDE_PX = 8_000;

export type ImageCheck =
  { kept: true; image: ToolResultImage; description: string } | { kept: false; description: string };

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
/** A MIME type as the model may read it; anything else a server declares is shown as "an unnamed type". */
const MIME_TYPE = /^[a-z0-9][a-z0-9.+-]{0,62}\/[a-z0-9][a-z0-9.+-]{0,62}$/i;

/** The server's declared type, safe to put in front of the model. */
export function declaredTypeLabel(mimeType: unknown): string {
  return typeof mimeType === 'string' && MIME_TYPE.test(mimeType) ? mimeType.toLowerCase() : 'an unnamed type';
}

/** Decoded size of a base64 string, without decoding it. */
function decodedBytes(base64: string): number {
  const padding = base64.endsWith('==') ? 2 : base64.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((base64.length * 3) / 4) - padding);
}

/**
 * One image block as the result keeps it: an image to send (with a line describing it) when it is
 * base64 of a PNG, JPEG, GIF or WebP within the limits; otherwise only a line saying why it was not kept.
 * `alreadyKept` is how many images of the same result were kept before this one.
 */
export function checkToolImage(mimeType: unknown, data: unknown, alreadyKept: number): ImageCheck {
  const declared = declaredTypeLabel(mimeType);
  const base64 = typeof data === 'string' ? data.replace(/\s+/g, '') : '';
  const bytes = decodedBytes(base64);
  const refused = (why: string): ImageCheck => ({
    kept: false,
    description: `[image content: ${declared}, ${bytes} bytes; not shown to you: ${why}]`,
  });
  if (alreadyKept >= TOOL_IMAGES_PER_RESULT_MAX)
    return refused(`a result shows at most ${TOOL_IMAGES_PER_RESULT_MAX} images`);
  if (bytes > TOOL_IMAGE_MAX_BYTES)
    return refused(`it is larger than ${TOOL_IMAGE_MAX_BYTES / (1024 * 1024)} MB, the most one image may be`);
  if (base64 === '' || base64.length % 4 !== 0 || !BASE64.test(base64)) return refused('its data is not base64');
  const sniffed = sniffImage(Buffer.from(base64, 'base64'));
  if (!sniffed) return refused('its data is not a PNG, JPEG, GIF or WebP image');
  const { mediaType, width, height } = sniffed;
  if (width < 1 || height < 1 || width > TOOL_IMAGE_MAX_SIDE_PX || height > TOOL_IMAGE_MAX_SIDE_PX)
    return refused(`it is ${width}×${height} px; a side may be at most ${TOOL_IMAGE_MAX_SIDE_PX} px`);
  const mismatch = declared === mediaType ? '' : ` (the server said ${declared})`;
  return {
    kept: true,
    image: { mediaType, data: base64 },
    description: `[image content: ${mediaType}, ${bytes} bytes, ${width}×${height} px${mismatch}]`,
  };
}

/** The format and dimensions read from an image's first bytes, or undefined when it is none of the four. */
export function sniffImage(bytes: Buffer): { mediaType: ImageMediaType; width: number; height: number } | undefined {
  if (bytes.length >= 24 && bytes.readUInt32BE(0) === 0x89504e47 && bytes.readUInt32BE(4) === 0x0d0a1a0a) {
    if (bytes.toString('latin1', 12, 16) !== 'IHDR') return undefined;
    return { mediaType: 'image/png', width: bytes.readUInt32BE(16), height: bytes.readUInt32BE(20) };
  }
  if (bytes.length >= 10 && /^GIF8[79]a$/.test(bytes.toString('latin1', 0, 6)))
    return { mediaType: 'image/gif', width: bytes.readUInt16LE(6), height: bytes.readUInt16LE(8) };
  if (bytes.length >= 4 && bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return sniffJpeg(bytes);
  if (bytes.length >= 30 && bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP')
    return sniffWebp(bytes);
  return undefined;
}

/** A JPEG's size is in its first start-of-frame segment, after any number of other segments. */
function sniffJpeg(bytes: Buffer): { mediaType: ImageMediaType; width: number; height: number } | undefined {
  let offset = 2;
  while (offset + 9 <= bytes.length) {
    if (bytes[offset] !== 0xff) return undefined;
    const marker = bytes[offset + 1]!;
    if (marker === 0xff) {
      offset += 1; // fill byte
      continue;
    }
    // Markers without a length: TEM, the restart markers, start of image.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd8)) {
      offset += 2;
      continue;
    }
    const isStartOfFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isStartOfFrame)
      return { mediaType: 'image/jpeg', height: bytes.readUInt16BE(offset + 5), width: bytes.readUInt16BE(offset + 7) };
    const length = bytes.readUInt16BE(offset + 2);
    if (length < 2) return undefined;
    offset += 2 + length;
  }
  return undefined;
}

/** WebP's three encodings keep their size in three places. */
function sniffWebp(bytes: Buffer): { mediaType: ImageMediaType; width: number; height: number } | undefined {
  const chunk = bytes.toString('latin1', 12, 16);
  if (chunk === 'VP8 ')
    return {
      mediaType: 'image/webp',
      width: bytes.readUInt16LE(26) & 0x3fff,
      height: bytes.readUInt16LE(28) & 0x3fff,
    };
  if (chunk === 'VP8L') {
    const bits = bytes.readUInt32LE(21);
    return { mediaType: 'image/webp', width: (bits & 0x3fff) + 1, height: ((bits >>> 14) & 0x3fff) + 1 };
  }
  if (chunk === 'VP8X')
    return { mediaType: 'image/webp', width: 1 + bytes.readUIntLE(24, 3), height: 1 + bytes.readUIntLE(27, 3) };
  return undefined;
}
