/**
 * HTTP/1.1 over a raw socket: the request target, headers and bytes exactly as written (no client normalizes `#`,
 * `;`, `..`, `//` or an absolute-form target away), for the tests that attack a server's routing.
 */
import { connect } from "node:net"

/** A raw response: status, lower-cased headers (the last of each), the body as text. */
export interface RawResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly setCookies: ReadonlyArray<string>
  readonly body: string
}

/** Sends `request` (the whole text: request line, headers, blank line, body) and reads until the server closes. */
export const rawRequest = (port: number, request: string | Buffer): Promise<RawResponse> =>
  new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1")
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on("error", reject)
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      const split = text.indexOf("\r\n\r\n")
      const head = split === -1 ? text : text.slice(0, split)
      let body = split === -1 ? "" : text.slice(split + 4)
      const [statusLine, ...lines] = head.split("\r\n")
      const headers: Record<string, string> = {}
      const setCookies: Array<string> = []
      for (const line of lines) {
        const colon = line.indexOf(":")
        const name = line.slice(0, colon).trim().toLowerCase()
        const value = line.slice(colon + 1).trim()
        headers[name] = value
        if (name === "set-cookie") setCookies.push(value)
      }
      if (headers["transfer-encoding"] === "chunked") body = dechunk(body)
      resolve({ status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? 0), headers, setCookies, body })
    })
    socket.write(request)
  })

const dechunk = (text: string): string => {
  let out = ""
  let rest = text
  for (;;) {
    const line = rest.indexOf("\r\n")
    if (line === -1) return out
    const size = parseInt(rest.slice(0, line), 16)
    if (!(size > 0)) return out
    out += rest.slice(line + 2, line + 2 + size)
    rest = rest.slice(line + 2 + size + 2)
  }
}

/** `GET <target>` with `Connection: close` and these extra header lines. */
export const rawGet = (port: number, target: string, headers: Record<string, string> = {}, method = "GET"): Promise<RawResponse> =>
  rawRequest(
    port,
    `${method} ${target} HTTP/1.1\r\nHost: ${headers["Host"] ?? `127.0.0.1:${port}`}\r\n` +
      Object.entries(headers).filter(([name]) => name !== "Host").map(([name, value]) => `${name}: ${value}\r\n`).join("") +
      "Connection: close\r\n\r\n"
  )
