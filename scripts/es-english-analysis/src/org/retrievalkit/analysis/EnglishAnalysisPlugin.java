/*
 * Registers Lucene's EnglishAnalyzer as the pre-built "english" analyzer.
 *
 * Elasticsearch's integ-test distribution on Maven Central ships without the
 * analysis-common module, which is where "english" normally comes from; this is the
 * same registration analysis-common makes (possessive filter, lowercase, English
 * stopwords, Porter stemming), so BEIR's Elasticsearch configuration can be reproduced.
 */
package org.retrievalkit.analysis;

import java.util.List;

import org.apache.lucene.analysis.en.EnglishAnalyzer;
import org.elasticsearch.index.analysis.PreBuiltAnalyzerProviderFactory;
import org.elasticsearch.indices.analysis.PreBuiltCacheFactory.CachingStrategy;
import org.elasticsearch.plugins.AnalysisPlugin;
import org.elasticsearch.plugins.Plugin;

public class EnglishAnalysisPlugin extends Plugin implements AnalysisPlugin {
    @Override
    public List<PreBuiltAnalyzerProviderFactory> getPreBuiltAnalyzerProviderFactories() {
        return List.of(
            new PreBuiltAnalyzerProviderFactory("english", CachingStrategy.LUCENE, EnglishAnalyzer::new)
        );
    }
}
