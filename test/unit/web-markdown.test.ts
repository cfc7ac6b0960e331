import { htmlToMarkdown, pageToMarkdown } from '../../activities/tools/web/to-markdown';

/** web_fetch's conversion: the article as Markdown through Readability and Turndown, text as it is. */
describe('web page to Markdown', () => {
  const article = `<!doctype html><html><head><title>Retries, explained</title><script>window.steal()</script><style>p{}</style></head><body>
    <nav><a href="/">Home</a> <a href="/login">Sign in</a></nav>
    <article><h1>How retries work</h1><p>Temporal <b>retries</b> activities. Read <a href="guide.html">the guide</a>.</p>
    <p>${'A durable activity is retried until it succeeds or its policy gives up. '.repeat(8)}</p>
    <ul><li>first</li><li>second</li></ul><pre><code>npm test</code></pre></article>
    <footer>Copyright and cookie banner</footer></body></html>`;

  test('an article keeps its structure, drops navigation and scripts, and its links become absolute', () => {
    const page = htmlToMarkdown(article, 'http://docs.example/retries/index.html');
    expect(page.title).toBe('Retries, explained');
    expect(page.markdown).toContain('## How retries work');
    expect(page.markdown).toContain('Temporal **retries** activities');
    expect(page.markdown).toContain('[the guide](http://docs.example/retries/guide.html)');
    expect(page.markdown).toMatch(/^-\s+first$/m);
    expect(page.markdown).toContain('```\nnpm test\n```');
    expect(page.markdown).not.toMatch(/Sign in|steal|cookie banner/);
  });

  test('a page that is no article still gives its text; plain text and JSON pass as they are; binary is not read', () => {
    const list = pageToMarkdown(
      Buffer.from('<html><body><ul><li><a href="/a">A</a></li></ul><script>x()</script></body></html>'),
      'text/html; charset=utf-8',
      'http://h.example/',
    );
    expect(list?.markdown).toMatch(/^-\s+\[A\]\(http:\/\/h\.example\/a\)$/);
    expect(pageToMarkdown(Buffer.from('{"a":1}'), 'application/json', 'http://h.example/')?.markdown).toBe('{"a":1}');
    expect(
      pageToMarkdown(Buffer.from('caf\xe9', 'latin1'), 'text/plain; charset=iso-8859-1', 'http://h.example/')?.markdown,
    ).toBe('café');
    expect(
      pageToMarkdown(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 0, 0]), 'image/png', 'http://h.example/'),
    ).toBeUndefined();
  });
});
