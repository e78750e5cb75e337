// The Vercel AI SDK against the proxy: tools, several steps, with a choice of provider.
// Usage: node ai_sdk.cjs generate|stream [compatible|openai|openai-chat|anthropic]
//   compatible: @ai-sdk/openai-compatible (chat completions); openai: @ai-sdk/openai's default
//   model (the Responses API); openai-chat: openai.chat(...); anthropic: @ai-sdk/anthropic.
// AGENTFSM_URL in the environment; NODE_PATH at .clients/node_modules.
const { generateText, streamText, tool, stepCountIs } = require("ai");
const { createOpenAICompatible } = require("@ai-sdk/openai-compatible");
const { createOpenAI } = require("@ai-sdk/openai");
const { createAnthropic } = require("@ai-sdk/anthropic");
const { z } = require("zod");

const calls = [];
const url = process.env.AGENTFSM_URL;
const models = {
  compatible: () =>
    createOpenAICompatible({ name: "agentfsm", baseURL: `${url}/v1`, apiKey: "unused" }).chatModel("fake-model"),
  openai: () => createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" })("fake-model"),
  "openai-chat": () => createOpenAI({ baseURL: `${url}/v1`, apiKey: "unused" }).chat("fake-model"),
  anthropic: () => createAnthropic({ baseURL: `${url}/v1`, apiKey: "unused" })("fake-model"),
};
const settings = {
  model: models[process.argv[3] || "compatible"](),
  tools: {
    get_weather: tool({
      description: "Get the current weather in a city.",
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        calls.push({ city });
        return `18 C and sunny in ${city}`;
      },
    }),
  },
  stopWhen: stepCountIs(5),
  maxRetries: 0,
  prompt: "What is the weather in Paris and in Rome? Use the get_weather tool.",
};

async function main(mode) {
  if (mode === "stream") {
    const result = streamText({ ...settings, onError: ({ error }) => { throw error; } });
    let streamed = "";
    for await (const delta of result.textStream) streamed += delta;
    const steps = await result.steps;
    console.log(JSON.stringify({ final: await result.text, streamed, calls, steps: steps.length }));
    return;
  }
  const result = await generateText(settings);
  console.log(JSON.stringify({ final: result.text, calls, steps: result.steps.length }));
}

main(process.argv[2]).catch((error) => {
  console.error(error);
  process.exit(1);
});
