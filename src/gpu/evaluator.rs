pub struct ElasticEvaluator; pub struct ElasticRest; pub struct Evaluation; pub struct EvalFlags;
