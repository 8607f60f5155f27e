// The `useChat` page of test/serve/ChatApi.test.ts, bundled by the test with esbuild and served by its valet server:
// the README's front-end code for `POST /agents/:name/chat`, with ids for the test to find things by.
import { useChat } from "@ai-sdk/react"
import { DefaultChatTransport } from "ai"
import { useState } from "react"
import { createRoot } from "react-dom/client"

function Chat() {
  const { messages, sendMessage, status, error } = useChat({
    transport: new DefaultChatTransport({ api: "/agents/calculator/chat" })
  })
  const [input, setInput] = useState("")
  return (
    <main>
      {messages.map((message) => (
        <div key={message.id} className={`message ${message.role}`}>
          {message.parts.map((part, i) =>
            part.type === "text" ? <p key={i}>{part.text}</p>
            : part.type === "dynamic-tool" ? <pre key={i} className="tool">{part.toolName}({JSON.stringify(part.input)}) → {String(part.output)}</pre>
            : null
          )}
        </div>
      ))}
      <form onSubmit={(event) => { event.preventDefault(); sendMessage({ text: input }); setInput("") }}>
        <input id="input" value={input} onChange={(event) => setInput(event.target.value)} />
        <button type="submit" disabled={status !== "ready"}>Send</button>
      </form>
      <p id="status">{status}</p>
      {error && <p id="error">{error.message}</p>}
    </main>
  )
}

createRoot(document.getElementById("root")).render(<Chat />)
