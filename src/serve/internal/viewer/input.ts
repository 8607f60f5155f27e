/**
 * The viewer script's view of a run's input given as parts (`GET /runs/:id`'s `inputParts`): text as text, images as
 * thumbnails, files and audio as a line naming them. An image is drawn only from its own bytes (base64 `data`, or a
 * `data:` URL) and only for the media types a part may carry (PNG, JPEG, GIF, WebP: no SVG, which may hold script);
 * an http(s) image is NOT fetched: its URL is shown as text, so opening a run never makes the browser ask another
 * host for anything (the page's Content-Security-Policy says `img-src data:` as well).
 */
export const input = String.raw`
const imageTypes = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const base64Text = /^[A-Za-z0-9+/]*={0,2}$/;
/** The size of base64 text once decoded, for people. */
const sizeOf = (data) => { const bytes = Math.floor(data.length * 3 / 4); return bytes < 1024 ? bytes + " B" : Math.round(bytes / 1024) + " KB"; };
/** A data: URL to draw, or null: only base64 images of the known types. */
const drawable = (part) => {
  if (typeof part.data === "string") return imageTypes.includes(part.mediaType) && base64Text.test(part.data) ? "data:" + part.mediaType + ";base64," + part.data : null;
  const m = /^data:([^;,]+);base64,([A-Za-z0-9+/]*={0,2})$/i.exec(part.url || "");
  return m && imageTypes.includes(m[1].toLowerCase()) ? part.url : null;
};
function inputView(parts) {
  return el("div", { class: "input-parts" }, ...parts.map((part, i) => {
    switch (part.type) {
      case "text": return el("div", { class: "text", text: part.text });
      case "image": {
        const src = drawable(part);
        if (src !== null) return el("img", { class: "thumb", src, alt: "image " + (i + 1), title: (part.mediaType || "image") + (part.data ? ", " + sizeOf(part.data) : "") });
        // Not fetched: the address, as text.
        return el("div", { class: "part image-url", text: "image (not loaded): " + (part.url || "") });
      }
      case "file": return el("div", { class: "part", text: "file " + (part.name || "") + " (" + part.mediaType + (part.data ? ", " + sizeOf(part.data) : ": " + (part.url || "")) + ")" });
      case "audio": return el("div", { class: "part", text: "audio (" + part.format + ", " + sizeOf(part.data) + ")" });
      default: return el("div", { class: "part", text: String(part.type) });
    }
  }));
}
/** Shows the run's input parts above its panels, when it was given as parts. */
async function showInput(runId, container) {
  const response = await api("runs/" + encodeURIComponent(runId));
  if (!response.ok) return;
  const view = await response.json();
  if (!Array.isArray(view.inputParts) || view.inputParts.length === 0) return;
  container.replaceChildren(el("h3", { text: "Input" }), inputView(view.inputParts));
  container.hidden = false;
}
`
