/**
 * A fetched page as readable Markdown. HTML goes through Mozilla's Readability (Firefox's reader view:
 * it keeps the article and drops navigation, ads and footers) on a linkedom document (a light DOM, no
 * browser, no script execution), then Turndown turns the article's HTML into Markdown. A page that is
 * not an article (a list, an index) falls back to its whole body without scripts and styles. Plain text,
 * Markdown and JSON are returned as they are; anything else is described, not decoded.
 */
import { Readability } from '@mozilla/readability';
import { parseHTML } from 'linkedom';
import TurndownService from 'turndown';
import { binaryReason } from '../../security/binary';

/** Markdown returned at most; a longer page is cut with a note (the result is offloaded past 50K anyway). */
export const WEB_FETCH_MAX_MARKDOWN_CHARS = 200_000;

/**
 * HTML characters converted at most. Conversion runs on the worker's event loop (about 0.5 ms per KB on
 * a quiet machine, several times that under load), so a huge page would stall every other activity;
 * articles are 50-300 KB of HTML, and the rest of a bigger page is cut with a note.
 */
export const WEB_FETCH_MAX_HTML_CHARS = 1_500_000;

const HTML_TYPES = new Set(['text/html', 'application/xhtml+xml']);
const TEXT_TYPES = /^(text\/|application\/(json|ld\+json|xml|rss\+xml|atom\+xml|javascript|x-ndjson)$)/;

export interface PageText {
  title?: string;
  markdown: string;
  /** Set when the HTML was cut at WEB_FETCH_MAX_HTML_CHARS before conversion. */
  htmlCut?: number;
}

/** Converts a body by its content type; undefined for content that is not text. */
export function pageToMarkdown(body: Buffer, contentType: string, url: string): PageText | undefined {
  const [mime = '', ...params] = contentType.split(';').map((s) => s.trim().toLowerCase());
  const charset = params
    .find((p) => p.startsWith('charset='))
    ?.slice(8)
    .replace(/"/g, '');
  const sniffedHtml = mime === '' && /^\s*(<!doctype html|<html)/i.test(body.subarray(0, 512).toString('latin1'));
  if (!HTML_TYPES.has(mime) && !sniffedHtml && !TEXT_TYPES.test(mime)) return undefined;
  if (mime === '' && binaryReason(body)) return undefined;
  const text = decode(body, charset);
  if (!HTML_TYPES.has(mime) && !sniffedHtml) return { markdown: text };
  if (text.length <= WEB_FETCH_MAX_HTML_CHARS) return htmlToMarkdown(text, url);
  return { ...htmlToMarkdown(text.slice(0, WEB_FETCH_MAX_HTML_CHARS), url), htmlCut: text.length };
}

export function htmlToMarkdown(html: string, url: string): PageText {
  const { document } = parseHTML(html);
  // Relative links become absolute against the page's own URL, unless the page names its own base.
  if (!document.querySelector('base[href]') && document.head) {
    const base = document.createElement('base');
    base.setAttribute('href', url);
    document.head.prepend(base);
  }
  const title = document.title?.trim() || undefined;
  const article = new Readability(document as unknown as ConstructorParameters<typeof Readability>[0], {
    charThreshold: 200,
  }).parse();
  let content = article?.content;
  if (!content) {
    const { document: whole } = parseHTML(html);
    for (const node of whole.querySelectorAll('script, style, noscript, template, iframe, svg')) node.remove();
    content = whole.body?.innerHTML ?? html;
  }
  const turndown = new TurndownService({ headingStyle: 'atx', codeBlockStyle: 'fenced', bulletListMarker: '-' });
  turndown.remove(['script', 'style', 'noscript', 'iframe']);
  const markdown = turndown.turndown(content).trim();
  return { ...(article?.title || title ? { title: (article?.title || title)! } : {}), markdown };
}

function decode(body: Buffer, charset: string | undefined): string {
  try {
    return new TextDecoder(charset || 'utf-8').decode(body);
  } catch {
    // An unknown charset label: UTF-8 is the web's default and the best guess.
    return new TextDecoder('utf-8').decode(body);
  }
}
