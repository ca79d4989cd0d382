import js from "@eslint/js";
import globals from "globals";
import tseslint from "typescript-eslint";

// What the product (src/, less its tests) must never import: test support and benchmarks, devkube (a devDependency,
// not installed in the image) and the local stack (dev/). A later block that sets no-restricted-imports for part of
// src/ replaces this list for those files, so each such block spreads it in.
const productImportPatterns = [
  {
    regex: "^\\.{1,2}/(.*/)?(test|bench)/",
    message: "src/ is the product: it must not import test support or benchmarks (test/, bench/).",
  },
  {
    regex: "^@mds/devkube(/|$)|^\\.{1,2}/(.*/)?(packages|dev)/",
    message:
      "src/ is the product: it must not import devkube (@mds/devkube, packages/devkube/) or the local stack (dev/); the image holds neither.",
  },
];
const productDynamicImportMessage = "src/ is the product: it must not import test/, bench/, dev/ or devkube.";

export default tseslint.config(
  { ignores: ["node_modules/", "dist/", ".mds/", "coverage/", ".tmp/", ".image/"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" },
      ],
      "no-console": "off",
    },
  },
  // The product (src/, less its tests) is what dist/ and the image hold: it must not import test support or
  // benchmarks (test/support/: the chaos harness, fault proxy, emulator, fakes), devkube or dev/.
  // test/deploy/image.test.ts checks the same on the compiled file set.
  {
    files: ["src/**/*.ts"],
    ignores: ["src/**/*.test.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: productImportPatterns }],
      "no-restricted-syntax": [
        "error",
        {
          selector: "ImportExpression[source.value=/^\\.{1,2}\\/(.*\\/)?(test|bench|dev|packages)\\//]",
          message: productDynamicImportMessage,
        },
        { selector: "ImportExpression[source.value=/^@mds\\/devkube/]", message: productDynamicImportMessage },
      ],
    },
  },
  // devkube is a package of its own that knows nothing of mds: it imports neither the product nor the local stack.
  {
    files: ["packages/devkube/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: "^\\.{1,2}/(.*/)?(src|dev|test|bench)/",
              message:
                "devkube stands alone: it must not import mds (src/), the local stack (dev/), tests or benchmarks.",
            },
          ],
        },
      ],
    },
  },
  {
    // The loop knows no kind: kinds plug into src/operator through src/resources/index.ts, never the other way.
    files: ["src/operator/**/*.ts"],
    ignores: ["src/operator/**/*.test.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            ...productImportPatterns,
            {
              group: ["**/resources/**", "**/resources"],
              message:
                "src/operator knows no kind: put kind-specific code in src/resources and plug it in through a Controller.",
            },
            {
              group: ["**/contract/**", "**/contract", "**/service/**", "**/service"],
              message:
                "src/operator knows no service: declare the narrow shape it needs (api.ts) and let src/resources/remote satisfy it.",
            },
          ],
        },
      ],
    },
  },
  {
    // The loop and the kinds stay readable in one screen per function: a longer one says why, with
    // `// eslint-disable-next-line max-lines-per-function -- <why>`.
    files: ["src/operator/**/*.ts", "src/resources/**/*.ts"],
    // The Secret component's files are being moved into one folder (issue 25 item 2); they get the rule there.
    ignores: ["src/**/*.test.ts"],
    rules: {
      "max-lines-per-function": ["error", { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Service routes only parse and render: an operation lives in src/service/domain/, never in another route file.
    files: ["src/service/routes/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            ...productImportPatterns,
            {
              group: ["./*", "../routes/*"],
              message: "routes do not import each other: put the shared operation in src/service/domain/",
            },
          ],
        },
      ],
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    languageOptions: { globals: globals.node },
  },
);
