/**
 * The run viewer at `GET /`: one self-contained page (no build step, nothing loaded from the network) that lists the
 * server's runs, starts one, and shows one live: a waterfall of the run (a bar per session — sub-agents indented —,
 * model call, tool call and wait for a person on one time axis; hover for durations and a model call's tokens)
 * beside the tree of its sub-sessions with their calls and tokens, its raw events (collapsed), and, while the run
 * waits for a person (DESIGN §15), its pending tool calls with Approve / Reject (and a reason) and its questions with
 * an answer box, decided through `POST /runs/:id/decisions/:toolCallId` and `POST /runs/:id/answers/:questionId`
 * (a refusal shows the server's message; a decision made elsewhere leaves the list too). Each model call shows its
 * tokens (input read from and written to a prompt cache, when the server said) and cost, and behind a fallback chain
 * which model answered and why the others did not (`ModelFellBack`); guardrail trips and rewrites are marked on the
 * waterfall. An input given as parts shows its images as thumbnails, drawn from their own bytes only: an image by
 * http(s) URL is shown as its address and never fetched (`img-src data:`). It reads the server's own
 * routes (`RunsApi`), so it sees and may do what an API client does. When the server wants a bearer token, open the
 * page once as `/?token=<token>`: the server answers with an HttpOnly, SameSite=Strict cookie that the page's
 * requests carry (the page itself is behind the token too). Model and tool text is never read as HTML. The page may
 * not be framed by another.
 *
 * @example
 * ```ts
 * import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
 * import { Layer } from "effect"
 * import { HttpRouter } from "effect/http"
 * import { HttpApiBuilder } from "effect/http-api"
 * import { createServer } from "node:http"
 * import { Agent, ScriptedModel } from "valet"
 * import * as Agents from "valet/Agents"
 * import * as Runs from "valet/Runs"
 * import * as RunsApi from "valet/RunsApi"
 * import * as Viewer from "valet/Viewer"
 *
 * const assistant = Agent.make({ name: "assistant", instructions: "Be brief.", model: ScriptedModel.layer(["Hi!"]) })
 *
 * // The page reads valet's routes on its own origin, so they are served beside it, unprefixed.
 * const RunsLive = HttpApiBuilder.layer(RunsApi.Api).pipe(
 *   Layer.provide(RunsApi.layer),
 *   Layer.provide(Runs.layer()),
 *   Layer.provide(Agents.layer([assistant]))
 * )
 *
 * // Open http://127.0.0.1:8787/ (`Server.layerNode` serves the same, behind the guard).
 * const main = HttpRouter.serve(Layer.mergeAll(Viewer.layer, RunsLive)).pipe(
 *   Layer.provide(NodeHttpServer.layer(createServer, { port: 8787, host: "127.0.0.1" })),
 *   Layer.launch
 * )
 * ```
 *
 * @since 0.2.0
 */
import { HttpRouter, HttpServerResponse } from "effect/http"
import { page } from "./internal/viewerPage.js"

/**
 * The page's HTML.
 *
 * @since 0.2.0
 * @category constants
 */
export const html: string = page

/**
 * `GET /` on the `HttpRouter` in context.
 *
 * @since 0.2.0
 * @category layers
 */
export const layer = HttpRouter.add(
  "GET",
  "/",
  HttpServerResponse.text(page, {
    contentType: "text/html; charset=utf-8",
    headers: {
      "cache-control": "no-cache",
      // Not in a frame of another page (its start-run form would be clickable under a signed-in viewer's cookie), no
      // connections but to this server, and no address sent along with a link.
      // Images only from data: URLs: an input image given by http(s) URL is shown as its address, and nothing on the
      // page makes the browser fetch from another host.
      "content-security-policy": "frame-ancestors 'none'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'",
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer"
    }
  })
)
