// The console's layout, measured in the page (evaluated by the browser tests and the screenshot
// script): every visible box and every line of text. Returns what is wrong, as sentences:
// - a box wider than the viewport (or the page scrolling sideways);
// - text set in a column narrower than two characters (lines of one character where the text has
//   more: 偏好 in a squeezed table column);
// - a word broken across lines (a Latin word, an id, or a short label such as 偏好 or 打开) when
//   it would fit on a line of its own. A key may wrap after an underscore (explanation_/style), a compound after its hyphen. Running Chinese text may wrap between any two characters.
() => {
  const width = document.documentElement.clientWidth;
  const problems = [];
  const name = (el) => `${el.tagName.toLowerCase()}${el.id ? '#' + el.id : ''}` +
    `${el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : ''}`;
  const clipped = new Map();
  const isClipped = (el) => {  // inside a visually hidden box (sr-only, a hidden table head)
    if (!el || el === document.body) return false;
    if (clipped.has(el)) return clipped.get(el);
    const box = el.getBoundingClientRect();
    const style = getComputedStyle(el);
    const own = style.display === 'none' || style.visibility === 'hidden' ||
      ((box.width <= 1 || box.height <= 1) && style.overflow === 'hidden');
    const result = own || isClipped(el.parentElement);
    clipped.set(el, result);
    return result;
  };
  const scroll = document.documentElement.scrollWidth;
  if (scroll > width + 1) problems.push(`the page scrolls sideways: ${scroll}px in ${width}px`);
  for (const el of document.body.querySelectorAll('*')) {
    if (['SCRIPT', 'STYLE', 'OPTION'].includes(el.tagName) || isClipped(el)) continue;
    if (el.id === 'skip-link') continue;  // parked above the page until focused
    const box = el.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > width + 1 || box.left < -1) {
      problems.push(`${name(el)} spans ${Math.round(box.left)}..${Math.round(box.right)}px of ${width}px`);
    }
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const lines = (range) => {
    const tops = [];
    let widest = 0;
    for (const r of range.getClientRects()) {
      if (r.width < 0.5) continue;
      widest = Math.max(widest, r.width);
      if (!tops.some((t) => Math.abs(t - r.top) < 3)) tops.push(r.top);
    }
    return { count: tops.length, widest };
  };
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent;
    const el = node.parentElement;
    if (!text.trim() || !el || isClipped(el) || ['SCRIPT', 'STYLE', 'OPTION', 'TEXTAREA'].includes(el.tagName)) continue;
    const size = parseFloat(getComputedStyle(el).fontSize);
    const range = document.createRange();
    range.selectNodeContents(node);
    const all = lines(range);
    if (all.count === 0) continue;
    const line = el.closest('li, td, th, dd, p, div, h2, h3, h4, button, a, label, span') || el;
    const room = line.getBoundingClientRect().width;
    const chars = [...text.trim()].length;
    if (chars >= 2 && all.count > 1 && all.widest < 1.9 * size) {
      problems.push(`"${text.trim().slice(0, 30)}" in ${name(el)} is set in a column ${Math.round(all.widest)}px wide (font ${size}px)`);
      continue;
    }
    const words = /[\p{Script=Han}]{2,6}|[A-Za-z0-9’']{2,}/gu;
    const shortLabel = chars <= 6 && !/\s/.test(text.trim());
    for (const match of shortLabel ? [[text.trim(), text.indexOf(text.trim())]] : text.matchAll(words)) {
      const word = match[0];
      const start = shortLabel ? match[1] : match.index;
      if (/[\p{Script=Han}]/u.test(word) && !shortLabel) continue;  // running Chinese may wrap anywhere
      const piece = document.createRange();
      piece.setStart(node, start);
      piece.setEnd(node, start + word.length);
      const measured = lines(piece);
      if (measured.count > 1) {
        const wordWidth = [...piece.getClientRects()].reduce((sum, r) => sum + r.width, 0);
        if (wordWidth < room - 1) {
          problems.push(`"${word}" in ${name(el)} breaks across ${measured.count} lines (${Math.round(room)}px of room)`);
        }
      }
    }
  }
  return [...new Set(problems)];
}
