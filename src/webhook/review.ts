import { ConversionError, convertObject } from "../resources/conversion/convert.ts";

// One ConversionReview (apiextensions.k8s.io/v1) in, one out: what the API server sends to a CRD's conversion
// webhook and expects back. A request that is not a ConversionReview is a 400 with what is wrong; an object that
// cannot be converted fails the whole review (result Failure with the reason), which the API server turns into an
// error for the client, as it requires: converted objects come all or none.

type Obj = Record<string, unknown>;

interface ReviewAnswer {
  status: number;
  body: Obj;
}

const reviewApiVersion = "apiextensions.k8s.io/v1";

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function badRequest(message: string): ReviewAnswer {
  return {
    status: 400,
    body: { kind: "Status", apiVersion: "v1", status: "Failure", message, reason: "BadRequest", code: 400 },
  };
}

export function reviewConversion(review: unknown): ReviewAnswer {
  if (!isObj(review) || review["kind"] !== "ConversionReview" || review["apiVersion"] !== reviewApiVersion)
    return badRequest(`expected a ConversionReview of ${reviewApiVersion} (conversionReviewVersions: [v1])`);
  const request = review["request"];
  if (!isObj(request)) return badRequest("ConversionReview.request is missing");
  const { uid, desiredAPIVersion, objects } = request;
  if (typeof uid !== "string" || uid === "") return badRequest("ConversionReview.request.uid must be a string");
  if (typeof desiredAPIVersion !== "string")
    return badRequest("ConversionReview.request.desiredAPIVersion must be a string");
  if (!Array.isArray(objects)) return badRequest("ConversionReview.request.objects must be a list");
  const answer = (response: Obj): ReviewAnswer => ({
    status: 200,
    body: { apiVersion: reviewApiVersion, kind: "ConversionReview", response: { uid, ...response } },
  });
  try {
    const convertedObjects = objects.map((o, i) => {
      if (!isObj(o)) throw new ConversionError(`objects[${i}] is not an object`);
      return convertObject(o, desiredAPIVersion);
    });
    return answer({ convertedObjects, result: { status: "Success" } });
  } catch (err) {
    if (!(err instanceof ConversionError)) throw err;
    return answer({ convertedObjects: [], result: { status: "Failure", message: err.message } });
  }
}
