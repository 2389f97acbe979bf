// A 2025-11-25 client on the TypeScript SDK 1.32 (npm
// `@modelcontextprotocol/sdk`, pinned by scripts/peers under
// .cache/peers/ts-sdk-1): connects over Streamable HTTP to CLIENT_URL,
// lists the tools, and calls CLIENT_TOOL with {"name": "orders"},
// answering each live elicitation/create with {"region": "eu-west-1"}.
// Prints one JSON line: the negotiated version, the tool names, the
// result's text and the questions asked. Run with its working directory
// where the SDK is installed:
//   CLIENT_URL=… CLIENT_TOOL=… node --input-type=module -e "$(cat ts1_client.mjs)"
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const client = new Client({ name: 'ts-sdk-1.32', version: '1.0.0' }, { capabilities: { elicitation: {} } });
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  return { action: 'accept', content: { region: 'eu-west-1' } };
});
const transport = new StreamableHTTPClientTransport(new URL(process.env.CLIENT_URL));
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const result = await client.callTool({ name: process.env.CLIENT_TOOL, arguments: { name: 'orders' } });
console.log(JSON.stringify({
  version: transport.protocolVersion,
  server: client.getServerVersion()?.name,
  tools,
  text: result.content?.[0]?.text,
  isError: result.isError ?? false,
  asked,
}));
await client.close();
