/**
 * The run viewer at `GET /`: one self-contained page (no build step, nothing loaded from the network) that lists the
 * server's runs, starts one, and shows one as a live timeline of its events beside the tree of its sub-sessions
 * with their model calls, tokens and timings. It reads the server's own routes (`RunsApi`), so it sees what an API
 * client sees. When the server wants a bearer token, open the page once as `/?token=<token>`: the server answers
 * with an HttpOnly, SameSite=Strict cookie that the page's requests carry (the page itself is behind the token too).
 * The page may not be framed by another.
 *
 * @since 0.2.0
 */
import { HttpRouter, HttpServerResponse } from "effect/http"
import { page } from "./internal/viewerPage.js"

/** The page's HTML. */
export const html: string = page

/** `GET /` on the `HttpRouter` in context. */
export const layer = HttpRouter.add(
  "GET",
  "/",
  HttpServerResponse.text(page, {
    contentType: "text/html; charset=utf-8",
    headers: {
      "cache-control": "no-cache",
      // Not in a frame of another page (its start-run form would be clickable under a signed-in viewer's cookie), no
      // connections but to this server, and no address sent along with a link.
      "content-security-policy": "frame-ancestors 'none'; connect-src 'self'; base-uri 'none'; form-action 'none'",
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer"
    }
  })
)
