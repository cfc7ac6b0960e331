/**
 * Which tool-result images one request shows the model. The conversation is re-sent on every step, so
 * an image that stayed in it forever would cost its tokens on every later step and push the request
 * towards the providers' size caps. The newest images are sent, within a count and a size budget.
 * Older ones stay in PostgreSQL with their message, and the model still reads each one's description
 * line in the result's text.
 */
import type { ChatMessage, ToolResultImage } from './types';

/** Images one request carries at most: the newest are the ones the model is working from. */
export const REQUEST_IMAGES_MAX = 8;
/** Base64 characters of images one request carries at most, well under Anthropic's 32 MB request cap. */
export const REQUEST_IMAGE_CHARS_MAX = 12 * 1024 * 1024;
/**
 * Prompt tokens one image is counted as: Anthropic scales an image to about 1.15 megapixels, about
 * 1,600 tokens, and OpenAI's high-detail tiles cost less. The budget guard uses this upper bound.
 */
export const IMAGE_TOKENS_ESTIMATE = 1_600;

/** The images of `messages` to send: the newest, until a budget is spent (identity set). */
export function imagesToSend(messages: readonly ChatMessage[]): ReadonlySet<ToolResultImage> {
  const chosen = new Set<ToolResultImage>();
  let chars = 0;
  for (let m = messages.length - 1; m >= 0; m--) {
    const content = messages[m]!.content;
    for (let b = content.length - 1; b >= 0; b--) {
      const block = content[b]!;
      if (block.type !== 'tool_result' || !block.images) continue;
      for (let i = block.images.length - 1; i >= 0; i--) {
        const image = block.images[i]!;
        // Stops at the first image that does not fit: the choice is always a newest run, so a session
        // whose older images were retired from PostgreSQL (`tool-result-images.ts`) yields the same request.
        if (chosen.size >= REQUEST_IMAGES_MAX || chars + image.data.length > REQUEST_IMAGE_CHARS_MAX) return chosen;
        chars += image.data.length;
        chosen.add(image);
      }
    }
  }
  return chosen;
}
