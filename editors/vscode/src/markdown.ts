// The chat's Markdown renderer (markdown-it), shared by the webview (assistant messages, plans, command output)
// and the unit tests, which check what a command's output renders to under plain node.
import MarkdownIt from 'markdown-it';

// html:false: model output and command output are untrusted; raw HTML in them must show as text, never run.
export const md = new MarkdownIt({ html: false, linkify: true, breaks: false });
// Only links with a scheme: fuzzy linking turns file names like README.md (.md is a TLD) into web links.
md.linkify.set({ fuzzyLink: false, fuzzyEmail: false });

export function renderMarkdown(text: string): string {
  return md.render(text);
}
